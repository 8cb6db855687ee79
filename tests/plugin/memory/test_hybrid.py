"""Recall's read path end to end: a current-state question prefers the memory that reports a
change, the one about the same part of life and the one that resembles the question's closest
memory, and says so in the hit's time rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import plugin.memory.feedback as feedback
import plugin.memory.time_rule as time_rule
from plugin.memory.feedback import FEEDBACK_WEIGHT
from plugin.memory.life_topics import TopicSpace
from plugin.memory.results import RecallHit
from plugin.memory.store import ChromaMemory
from plugin.models.embeddings import Embedder
from tests.plugin.memory.index.consistency import chroma_embeddings

NOW = "2026-06-01T12:00:00Z"
CORPORA = Path(__file__).resolve().parents[3] / "fixtures" / "stale_current"


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
        parts = top.relevance
        assert parts is not None and parts.topic is not None and parts.closest is not None
        blended = (1 - FEEDBACK_WEIGHT) * parts.cosine + FEEDBACK_WEIGHT * parts.closest
        assert top.similarity == pytest.approx(
            (blended + time_rule.TOPIC_WEIGHT * parts.topic) * (1 + time_rule.CHANGE_GAIN)
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


def test_a_state_question_prefers_the_memory_that_resembles_its_closest_one(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One user of a stale-versus-current set: her new job shares little with the question,
    but resembles the old job, the question's closest memory."""
    lines = (CORPORA / "v" / "memories.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if '"user_id": "ngozi"' in line]
    question = "Where am I working right now?"
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(records)

        def ranked() -> list[RecallHit]:
            return list(memory.recall(question, "ngozi", now=NOW, top_k=30).results)

        hits = ranked()
        assert hits[0].id == "ngozi-job-new"
        # each hit's closest is its cosine with the query's closest memory, from Chroma's rows
        vectors = {ident: np.asarray(v, dtype=np.float64) for ident, v in
                   chroma_embeddings(memory, "ngozi").items()}  # fmt: skip
        closest = max(hits, key=lambda hit: hit.relevance.cosine if hit.relevance else -1.0)
        assert closest.id == "ngozi-job-old"
        anchor = vectors[closest.id] / np.linalg.norm(vectors[closest.id])
        for hit in hits:
            assert hit.relevance is not None and hit.relevance.closest is not None
            own = vectors[hit.id] / np.linalg.norm(vectors[hit.id])
            expected = hit.relevance.cosine if hit.id == closest.id else float(own @ anchor)
            assert hit.relevance.closest == pytest.approx(expected, abs=1e-5), hit.id
        assert "with the closest memory" in hits[0].time_rule
        monkeypatch.setattr(feedback, "FEEDBACK_WEIGHT", 0.0)
        assert ranked()[0].id == "ngozi-job-old"  # without it the stale job wins
