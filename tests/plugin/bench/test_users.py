"""``affect-memory bench users --quick --json``: many users' collections after a restart, in
every mode, with no query failing (timings unchecked)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from typing import Any

import pytest

from affect_memory.bench.users import format_report
from affect_memory.cli import main


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick JSON run (12 users of 50 memories, a cache of 8) shared by the module."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "users", "--quick", "--cache", "8", "--json"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_every_mode_queries_every_user_twice_after_a_restart(report: dict[str, Any]) -> None:
    rows = report["rows"]
    assert [(r["layout"], r["mode"]) for r in rows] == [
        ("12x50", "embedded"),
        ("12x50", "embedded-cache"),
        ("12x50", "server-cache"),
    ]
    for row in rows:
        assert row["failures"] == 0  # 12 users over a cache of 8: evicted ones reload fine
        for key in ("first_query_ms", "later_query_ms"):
            assert 0 < row[key]["median"] <= row[key]["p95"]
        assert row["client_peak_rss_mb"] > 0
    embedded, bounded, server = rows
    assert embedded["index_cache"] > bounded["index_cache"] >= 8
    assert server["index_cache"] == 8 and server["server_peak_rss_mb"] > 0


def test_the_table_names_each_mode(report: dict[str, Any]) -> None:
    text = format_report(report)
    assert "embedded-cache" in text and "server-cache" in text and "first query ms" in text


@pytest.mark.parametrize("bad", [["--layouts", "10"], ["--layouts", "0x5"], ["--modes", "cloud"]])
def test_bad_options_are_refused_with_the_subcommands_usage(
    bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "users", *bad])
    assert exited.value.code == 2 and "bench users" in capsys.readouterr().err
