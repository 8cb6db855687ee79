"""``affect-memory bench engine --quick --json`` runs and reports every stage (not timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from affect_memory.bench.engine import REPORTED_STAGES, format_report

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", "bench", "engine", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    parsed: dict[str, Any] = json.loads(completed.stdout)
    return parsed


def test_the_quick_engine_bench_reports_json_of_the_documented_shape(
    report: dict[str, Any],
) -> None:
    assert report["benchmark"] == "engine" and report["store"] == "sqlite"
    assert [run["processes"] for run in report["runs"]] == [1, 4]
    for run in report["runs"]:
        assert run["turns"] == run["processes"] * report["turns_per_process"]
        assert run["turns_per_second"] > 0 and run["seconds"] > 0
        assert set(run["stages_ms"]) == set(REPORTED_STAGES)
        for summary in [run["turn_ms"], run["overhead_ms"], *run["stages_ms"].values()]:
            assert set(summary) == {"median", "p95"}
            assert 0 <= summary["median"] <= summary["p95"]
    target = report["target"]
    assert target["overhead_median_ms"] == 5.0
    assert target["measured_ms"] == report["runs"][0]["overhead_ms"]["median"]
    assert isinstance(target["met"], bool)


def test_the_table_names_every_stage(report: dict[str, Any]) -> None:
    table = format_report(report)
    for stage in REPORTED_STAGES:
        assert f"\n{stage} " in table
    assert "turns/s" in table and "target: median overhead" in table


def test_a_bad_turn_count_is_a_usage_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", "bench", "engine", "--turns", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "--turns" in completed.stderr


def test_the_engine_bench_measures_a_postgresql_server_in_a_schema_it_drops() -> None:
    from tests.plugin.state.postgres_fixture import (
        require_psycopg,
        run_sql,
        server_url,
        temporary_schema,
    )

    require_psycopg()
    url = server_url()
    with temporary_schema(url) as schema:
        completed = subprocess.run(
            [sys.executable, "-m", "affect_memory.cli", "bench", "engine", "--quick", "--json",
             "--state", f"{url}?schema={schema}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr
        assert run_sql(url, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)) == []
    measured = json.loads(completed.stdout)
    assert measured["store"] == "postgresql"
    assert [run["turns"] for run in measured["runs"]] == [30, 120]
