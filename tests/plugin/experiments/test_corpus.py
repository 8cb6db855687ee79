"""The personal-memory corpus: seeded, user-scoped, and convertible into labelled queries."""

from datetime import timedelta

import pytest

from affect_memory.experiments.corpus import (
    build_corpus,
    candidates_from_hits,
    labelled_from_candidates,
)
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.memory.results import RecallHit


def test_the_same_seed_gives_the_same_corpus() -> None:
    assert build_corpus(seed=1) == build_corpus(seed=1)
    assert build_corpus(seed=1) != build_corpus(seed=2)


def test_every_answer_is_a_memory_of_the_asking_user() -> None:
    corpus = build_corpus(seed=3)
    owners = {record.id: record.user_id for record in corpus.records}
    assert len(owners) == len(corpus.records)
    for query in corpus.queries:
        assert owners[query.relevant_id] == query.user_id
    assert {query.category for query in corpus.queries} == {
        "stale vs current", "old but true", "emotional"}


def test_emotional_queries_are_asked_in_a_mood_of_the_episode_sign() -> None:
    corpus = build_corpus(seed=4)
    valence = {record.id: record.emotional_valence for record in corpus.records}
    for query in corpus.queries:
        if query.category == "emotional":
            assert query.mood_valence * valence[query.relevant_id] > 0
            assert abs(query.mood_valence) >= 0.4


def _candidate(memory_id: str, days: float, episode: bool = False) -> MemoryCandidate:
    corpus = build_corpus(seed=0)
    return MemoryCandidate(id=memory_id, text="", distance=0.5, episode=episode, significance=0.25,
                           timestamp=(corpus.now - timedelta(days=days)).isoformat())


def test_candidates_become_a_labelled_query_with_ages_in_days() -> None:
    corpus = build_corpus(seed=0)
    candidates = [_candidate("a", 2.0), _candidate("b", 30.5, episode=True)]
    labelled = labelled_from_candidates(candidates, "b", now=corpus.now, mood_valence=-0.5)
    assert labelled is not None
    assert labelled.relevant == 1
    assert labelled.ages_days.tolist() == pytest.approx([2.0, 30.5])
    assert labelled.episodes.tolist() == [False, True]
    assert labelled.mood_valence == -0.5
    assert labelled_from_candidates(candidates, "missing", now=corpus.now) is None
    undated = [MemoryCandidate(id="c", text="", distance=0.1)]
    with pytest.raises(InvalidInputError, match="timestamp"):
        labelled_from_candidates(undated, "c", now=corpus.now)


def test_recall_hits_map_back_to_candidates() -> None:
    hit = RecallHit(id="m", text="t", score=0.4, distance=0.6, similarity=0.7, recency=1.0,
                    salience=1.01, congruence=1.0, episode=0.05,
                    timestamp="2026-11-30T09:00:00+00:00", significance=0.3, recall_count=2,
                    emotional_valence=-0.4)
    (candidate,) = candidates_from_hits([hit])
    assert (candidate.id, candidate.distance, candidate.episode, candidate.recall_count) == (
        "m", 0.6, True, 2)
    assert candidate.emotional_valence == -0.4
