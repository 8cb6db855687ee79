"""Recall's read path end to end: a current-state question prefers the memory that reports a
change and the one about the same part of life, and says so in the hit's time rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import plugin.memory.time_rule as time_rule
from plugin.memory.life_topics import TopicSpace
from plugin.memory.store import ChromaMemory
from plugin.models.embeddings import Embedder
from tests.plugin.memory.index.consistency import chroma_embeddings

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
        assert top.relevance is not None and top.relevance.topic is not None
        assert top.similarity == pytest.approx(
            (top.relevance.cosine + time_rule.TOPIC_WEIGHT * top.relevance.topic)
            * (1 + time_rule.CHANGE_GAIN)
        )
        assert "reports a change: 'stopped'" in top.time_rule
        monkeypatch.setattr(time_rule, "CHANGE_GAIN", 0.0)
        assert _ranked(memory) == ["band", "piano"]  # without the gain the old fact wins


JOBS = [
    {"id": "cashier", "text": "I work as a cashier at the supermarket on Elm Street.",
     "timestamp": "2025-10-01T09:00:00Z"},
    {"id": "chef", "text": "They took me on as a trainee chef in the hotel kitchen.",
     "timestamp": "2026-05-20T09:00:00Z"},
    {"id": "rain", "text": "Rain all weekend, so I stayed in and watched old films.",
     "timestamp": "2026-05-30T09:00:00Z"},
    {"id": "cousin", "text": "My cousin is coming to visit next week.",
     "timestamp": "2026-05-29T09:00:00Z"},
    {"id": "course", "text": "I'm doing an online course in the evenings.",
     "timestamp": "2026-05-28T09:00:00Z"},
]  # fmt: skip
"""An old job, its update sharing no word with the question, and newer small talk."""


def test_a_state_question_prefers_the_memory_about_the_same_part_of_life(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([{**record, "user_id": "ann"} for record in JOBS])

        def ranked() -> list[str]:
            result = memory.recall("What do I do for a living?", "ann", now=NOW, top_k=3)
            return [hit.id for hit in result.results]

        first = ranked()
        assert first[0] == "chef"
        # each hit's topic is its agreement with the query, computed here from Chroma's rows
        space = TopicSpace.of(embedder)
        query = embedder.embed_documents(["What do I do for a living?"])[0]
        result = memory.recall("What do I do for a living?", "ann", now=NOW, top_k=5)
        vectors = chroma_embeddings(memory, "ann")
        for hit in result.results:
            (expected,), _ = space.agreement(query, np.asarray([vectors[hit.id]]))
            assert hit.relevance is not None and hit.relevance.topic is not None
            assert hit.relevance.topic == pytest.approx(expected, abs=1e-5), hit.id
        hit = memory.recall("What do I do for a living?", "ann", now=NOW, top_k=1).results[0]
        assert hit.relevance is not None and hit.relevance.topic is not None
        assert hit.relevance.topic > 0.3 and "topic agreement" in hit.time_rule
        assert "on 'work'" in hit.time_rule
        # an event question has no topic term
        other = memory.recall("Who visited me?", "ann", now=NOW, top_k=1).results[0]
        assert other.relevance is not None and other.relevance.topic is None
        monkeypatch.setattr(time_rule, "TOPIC_WEIGHT", 0.0)
        assert ranked()[0] == "course"  # by the cosine alone, unrelated small talk wins
