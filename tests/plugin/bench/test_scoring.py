"""``affect-memory bench scoring --quick`` reports the documented shape (timings unchecked)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from typing import Any

import pytest

from affect_memory.cli import main


def run(*argv: str) -> str:
    """Run the command line, returning what it printed."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "scoring", "--quick", *argv]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick JSON run shared by the module."""
    parsed: dict[str, Any] = json.loads(run("--json"))
    return parsed


def test_rows_have_exactly_the_documented_keys(report: dict[str, Any]) -> None:
    assert [row["n"] for row in report["rows"]] == [64, 1_000, 20_000]
    for row in report["rows"]:
        assert set(row) == {"n", "scalar_per_s", "columnar_per_s", "ratio"}
        assert isinstance(row["n"], int)
        for key in ("scalar_per_s", "columnar_per_s", "ratio"):
            assert isinstance(row[key], float) and math.isfinite(row[key]) and row[key] > 0
        assert row["ratio"] == pytest.approx(row["columnar_per_s"] / row["scalar_per_s"])


def test_cpu_time_rows_mirror_the_wall_clock_rows(report: dict[str, Any]) -> None:
    assert [row["n"] for row in report["cpu_time_rows"]] == [64, 1_000, 20_000]
    assert all(
        set(row) == {"n", "scalar_per_s", "columnar_per_s", "ratio"}
        for row in report["cpu_time_rows"]
    )


def test_extrapolated_sizes_and_bandwidth_are_reported(report: dict[str, Any]) -> None:
    assert report["scalar_sample"] == {"20000": 2_000}
    assert any("extrapolated" in note for note in report["notes"])
    bandwidth = report["bandwidth"]
    assert bandwidth["copy_gb_per_s"] > 0 and bandwidth["floor_candidates_per_s"] > 0
    assert report["limit"] == 6
    assert report["plain_numpy"]["n"] == 20_000 and report["plain_numpy"]["plain_numpy_per_s"] > 0


def test_the_table_names_every_size() -> None:
    table = run("--limit", "3")
    assert "columnar cand/s" in table and "20,000" in table and "extrapolated" in table
    assert "top-3" in table
