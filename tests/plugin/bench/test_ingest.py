"""``affect-memory bench ingest --quick --json`` reports rates by batch size (timings unchecked)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from typing import Any

import pytest

from affect_memory.bench.ingest import format_report
from affect_memory.cli import main


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick JSON run shared by the module."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "ingest", "--quick", "--json"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_one_row_per_batch_size_and_every_memory_stored(report: dict[str, Any]) -> None:
    assert [row["batch_size"] for row in report["rows"]] == [16, 64]
    for row in report["rows"]:
        assert row["memories"] == row["stored"] == report["memories_per_batch_size"] == 128


def test_rates_are_positive_and_the_split_adds_up(report: dict[str, Any]) -> None:
    for row in report["rows"]:
        for key in ("seconds", "memories_per_s", "embed_per_s", "write_per_s"):
            assert math.isfinite(row[key]) and row[key] > 0
        assert row["memories_per_s"] <= row["embed_per_s"]
        share = row["share"]
        assert all(0.0 <= share[part] <= 1.0 for part in ("embed", "validate", "write"))
        assert sum(share.values()) == pytest.approx(1.0, abs=0.01)
        assert 0 < row["batch_ms"]["median"] <= row["batch_ms"]["p95"]


def test_the_table_names_each_batch_size(report: dict[str, Any]) -> None:
    text = format_report(report)
    assert "memories/s" in text and "embed / validate / write" in text
    assert report["model"] == "all-MiniLM-L6-v2" and report["machine"]["cpus"] >= 1
