"""``affect-memory bench ingest --quick --json``: short and long texts side by side, each run
beside the bare embedder and the old default (rates are reported, never checked)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from typing import Any

import pytest

from affect_memory.bench.chat_turns import long_turns
from affect_memory.bench.ingest import RUNS, format_report
from affect_memory.cli import main
from affect_memory.models.onnx_embedder import every_core


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick JSON run shared by the module."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "ingest", "--quick", "--json"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_every_run_of_both_kinds_of_text_is_a_row(report: dict[str, Any]) -> None:
    assert report["texts"] == {"short": 48, "long": 12}
    assert [(r["texts"], r["run"], r["embed_ahead"]) for r in report["rows"]] == [
        (kind, run.name, run.embed_ahead) for kind in ("short", "long") for run in RUNS
    ]
    cores = report["every_core_threads"]
    assert cores == every_core()
    assert [r["threads"] for r in report["rows"][:5]] == [cores, 1, cores, cores, 1]
    assert report["word_pieces"]["long"]["kept"] == 256  # every long turn fills the model
    assert report["word_pieces"]["short"]["max"] < 64


def test_the_ratios_are_to_the_bare_embedder_and_the_old_default(report: dict[str, Any]) -> None:
    for kind in ("short", "long"):
        rows = [r for r in report["rows"] if r["texts"] == kind]  # in the order of RUNS
        old = rows[-1]["texts_per_s"]
        for run, row in zip(RUNS, rows, strict=True):
            assert math.isfinite(row["texts_per_s"]) and row["texts_per_s"] > 0
            bare = rows[0 if run.every_core else 1]["texts_per_s"]
            # the ratios are of the rates as reported, rounded to three places
            assert row["vs_bare"] == pytest.approx(row["texts_per_s"] / bare, abs=6e-4)
            assert row["vs_old_default"] == pytest.approx(row["texts_per_s"] / old, abs=6e-4)
        assert rows[-1]["run"] == "ingest, old default" and rows[-1]["vs_old_default"] == 1.0


def test_the_table_shows_both_kinds_side_by_side(report: dict[str, Any]) -> None:
    text = format_report(report)
    assert "× bare" in text and "× old default" in text
    assert "short (" in text and "long (256 pieces)" in text
    assert report["model"] == "all-MiniLM-L6-v2" and report["machine"]["cpus"] >= 1


def test_long_turns_are_distinct_and_the_same_for_a_seed() -> None:
    turns = long_turns(40, seed=3)
    assert len(set(turns)) == 40 and turns == long_turns(40, seed=3) != long_turns(40, seed=4)
    assert all(len(turn.split()) >= 210 for turn in turns)
