"""The demo, end to end on the embedded default: real gate, Chroma, SQLite; scripted replies."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from plugin.demo import DEMO_CONVERSATION, DEMO_USER, run_demo
from plugin.errors import StoreError


def test_the_demo_prints_every_turn_with_state_and_evidence_and_commits_it(tmp_path: Path) -> None:
    out = io.StringIO()
    turns = run_demo(tmp_path, out=out)
    text = out.getvalue()
    assert len(turns) == len(DEMO_CONVERSATION)
    for number, turn in enumerate(turns, start=1):
        assert f"Turn {number} " in text
        assert f"gate      {turn.intent}" in text
    assert text.count("  mood      V ") == len(turns)
    assert text.count("  presence  ") == len(turns)
    recalled = [turn for turn in turns if turn.result.memories]
    assert recalled, "the demo should retrieve memories on some turns"
    # The question about home surfaces the current fact above the stale one.
    home = next(turn for turn in turns if "where I live" in turn.message)
    ranked = [scored.candidate.id for scored in home.result.memories]
    assert "alice-home-new" in ranked
    assert "alice-home-old" not in ranked or ranked.index("alice-home-new") < ranked.index(
        "alice-home-old"
    )
    assert all(
        scored.candidate.id.startswith(("alice-", "turn-"))
        for turn in turns
        for scored in turn.result.memories
    )
    with sqlite3.connect(tmp_path / "demo" / "state.db") as db:
        (messages,) = db.execute("SELECT count(*) FROM messages").fetchone()
    assert messages == 2 * len(DEMO_CONVERSATION)
    assert DEMO_USER in text


def test_the_demo_recreates_its_own_directory_but_refuses_a_foreign_one(tmp_path: Path) -> None:
    foreign = tmp_path / "demo"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("not the demo's")
    with pytest.raises(StoreError, match="not made by the demo"):
        run_demo(tmp_path, out=io.StringIO())
    assert (foreign / "precious.txt").exists()
