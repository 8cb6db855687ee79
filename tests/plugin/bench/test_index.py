"""``affect-memory bench index --quick --json`` fills a store through the journal and reports
the index's read latencies and write share (timings unchecked, only their shape)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from typing import Any

import pytest

from affect_memory.bench.index import _sizes, format_report
from affect_memory.cli import main
from affect_memory.kernel.errors import InvalidInputError


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "index", "--quick", "--json"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_every_memory_is_stored_and_indexed_and_queries_find_some(report: dict[str, Any]) -> None:
    (row,) = report["rows"]
    assert row["backend"] == "sqlite" and row["memories"] == row["stored"] == row["indexed"] == 300
    assert 0 < row["mean_hits"] <= report["limit"]


def test_latencies_and_the_write_share_are_reported(report: dict[str, Any]) -> None:
    (row,) = report["rows"]
    for key in ("lexical_search_ms", "rehearsal_64_ms", "newest_epoch_ms", "add_batch_ms"):
        assert 0 < row[key]["median"] <= row[key]["p95"]
    assert 0 < row["index_share_of_add"] < 1
    assert "lexical p50 / p95 ms" in format_report(report)


def test_sizes_must_be_positive_counts() -> None:
    assert _sizes("1000,10000", quick=False) == (1000, 10000)
    for bad in ("", "ten", "0", "5,-1"):
        with pytest.raises(InvalidInputError, match="--sizes takes positive counts"):
            _sizes(bad, quick=False)
