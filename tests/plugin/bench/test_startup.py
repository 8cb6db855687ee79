"""``affect-memory bench startup --quick --json`` runs every case and reports its shape (not
timings: speed is only ever read off the benchmark's report)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from affect_memory.bench.startup import CASES, TARGET_RATIO, TARGETS, format_report

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", "bench", "startup", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    parsed: dict[str, Any] = json.loads(completed.stdout)
    return parsed


def test_every_case_runs_once_and_is_compared_with_the_baseline(report: dict[str, Any]) -> None:
    assert report["benchmark"] == "startup" and report["repeats"] == 1
    assert report["skipped"] == {}
    rows = {row["name"]: row for row in report["cases"]}
    assert list(rows) == [case.name for case in CASES]
    assert rows["baseline"]["ratio"] == 1.0
    assert report["baseline_s"] == rows["baseline"]["median_s"]
    for case in CASES:
        row = rows[case.name]
        assert len(row["seconds"]) == 1 and row["seconds"][0] > 0
        assert row["median_s"] == row["seconds"][0]
        assert row["ratio"] == pytest.approx(row["median_s"] / report["baseline_s"], abs=2e-3)
        assert row["cache"] == case.cache
    assert {rows[name]["cache"] for name in ("recall_first_run", "mcp_first_run")} == {"empty"}


def test_the_targets_are_recall_and_the_first_mcp_call_within_3x(report: dict[str, Any]) -> None:
    rows = {row["name"]: row for row in report["cases"]}
    assert [target["case"] for target in report["targets"]] == list(TARGETS) == ["recall", "mcp"]
    for target in report["targets"]:
        assert target["max_ratio"] == TARGET_RATIO == 3.0
        assert target["ratio"] == rows[target["case"]]["ratio"]
        assert target["met"] is (target["ratio"] <= 3.0)


def test_the_table_names_every_case_and_target(report: dict[str, Any]) -> None:
    table = format_report(report)
    for case in CASES:
        assert f"\n{case.name} " in table
    assert "target: one-shot recall <= 3x import chromadb" in table
    assert "target: first MCP tool call <= 3x import chromadb" in table


def test_a_bad_repeat_count_is_a_usage_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", "bench", "startup", "--repeats", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        "affect-memory bench: --repeats must be a positive integer, got 0"
    )
