"""Recall's read path end to end: a current-state question prefers the memory that reports a
change, and says so in the hit's time rule."""

from __future__ import annotations

from pathlib import Path

import pytest

import plugin.memory.time_rule as time_rule
from plugin.memory.store import ChromaMemory
from plugin.models.embeddings import Embedder

NOW = "2026-06-01T12:00:00Z"


def _ranked(memory: ChromaMemory) -> list[str]:
    hits = memory.recall("What instrument do I play?", "ann", now=NOW, top_k=2).results
    return [hit.id for hit in hits]


def test_a_state_question_prefers_the_update_that_reports_a_change(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([
            {"id": "band", "text": "I play the guitar in a local band.", "user_id": "ann",
             "timestamp": "2026-04-01T09:00:00Z"},
            {"id": "piano", "text": "I stopped the guitar and now play the piano at home.",
             "user_id": "ann", "timestamp": "2026-05-10T09:00:00Z"},
        ])  # fmt: skip
        # The old fact is closer to the question and only 39 days older than its update.
        assert _ranked(memory) == ["piano", "band"]
        top = memory.recall("What instrument do I play?", "ann", now=NOW, top_k=1).results[0]
        assert top.relevance is not None and top.similarity == pytest.approx(
            top.relevance.cosine * (1 + time_rule.CHANGE_GAIN)
        )
        assert "reports a change: 'stopped'" in top.time_rule
        monkeypatch.setattr(time_rule, "CHANGE_GAIN", 0.0)
        assert _ranked(memory) == ["band", "piano"]  # without the gain the old fact wins
