"""Memory scoring and ranking: recency, salience, congruence, dedupe and order."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affect_memory.kernel import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    InvalidInputError,
    MemoryCandidate,
    RetrievalWeights,
    candidate_score,
    mood_congruence_factor,
    rank_candidates,
    recency_weight,
    score_candidate,
)
from tests.kernel.strategies import NOW, PROPERTY, candidates, signed, unit, zoned_timestamps

# --- recency ---------------------------------------------------------------------------------


@given(zoned_timestamps() | st.none() | st.sampled_from(["", "soon", "2026-01-01T00:00:00"]))
@PROPERTY
def test_recency_weight_stays_between_floor_and_one(timestamp: str | None) -> None:
    assert 0.40 <= recency_weight(timestamp, NOW) <= 1.0


@given(st.floats(-100, 400, allow_nan=False), st.floats(-100, 400, allow_nan=False))
@PROPERTY
def test_recency_weight_never_grows_with_age(days1: float, days2: float) -> None:
    younger, older = sorted((days1, days2))
    fresh = recency_weight(NOW - timedelta(days=younger), NOW)
    stale = recency_weight(NOW - timedelta(days=older), NOW)
    assert stale <= fresh


@pytest.mark.parametrize("days", [-365.0, -1.0, -1e-6, 0.0])
def test_recency_weight_gives_future_and_present_full_freshness(days: float) -> None:
    assert recency_weight((NOW - timedelta(days=days)).isoformat(), NOW) == 1.0


@pytest.mark.parametrize(
    "timestamp", [None, "", "not-a-date", "2026-01-01T00:00:00", 17, "2026-02-30"]
)
def test_recency_weight_falls_back_for_unusable_timestamps(timestamp: object) -> None:
    assert recency_weight(timestamp, NOW) == 0.70  # type: ignore[arg-type]


def test_recency_weight_is_independent_of_the_offset_spelling() -> None:
    moment = NOW - timedelta(days=12)
    spellings = [
        moment.isoformat(),
        moment.isoformat().replace("+00:00", "Z"),
        moment.astimezone(timezone(timedelta(hours=5, minutes=30))).isoformat(),
        moment.astimezone(timezone(timedelta(hours=-11))).isoformat(),
    ]
    assert [recency_weight(s, NOW) for s in spellings] == pytest.approx([0.8] * 4)
    assert recency_weight(moment, NOW) == pytest.approx(0.8)


def test_recency_weight_requires_a_zoned_now() -> None:
    with pytest.raises(InvalidInputError, match="now"):
        recency_weight("2026-01-01T00:00:00Z", datetime(2026, 1, 31))


def test_recency_weight_uses_caller_weights() -> None:
    weights = RetrievalWeights(recency_horizon_days=10.0, recency_floor=0.1, recency_fallback=0.5)
    assert recency_weight(NOW - timedelta(days=5), NOW, weights=weights) == pytest.approx(0.5)
    assert recency_weight(NOW - timedelta(days=50), NOW, weights=weights) == 0.1
    assert recency_weight(None, NOW, weights=weights) == 0.5


# --- candidate score ---------------------------------------------------------------------------


@given(
    st.floats(0, 2),
    st.floats(-50, 500, allow_nan=False),
    st.booleans(),
    st.floats(-5, 5, allow_nan=False),
    st.integers(0, 10_000),
)
@PROPERTY
def test_candidate_score_is_bounded_by_its_factors(
    distance: float, days: float, episode: bool, significance: float, recalls: int
) -> None:
    score = candidate_score(distance, days, episode, significance, recalls)
    bonus = 0.05 if episode else 0.0
    similarity = 1 - distance / 2
    assert similarity * 0.40 + bonus - 1e-12 <= score
    assert score <= similarity * 1.0 * (1 + 0.03 + 0.025) + bonus + 1e-12


@given(st.floats(0, 2), st.floats(0, 2), st.floats(0, 100), unit(), st.integers(0, 100))
@PROPERTY
def test_candidate_score_never_rises_with_distance(
    d1: float, d2: float, days: float, significance: float, recalls: int
) -> None:
    near, far = sorted((d1, d2))
    assert candidate_score(far, days, False, significance, recalls) <= candidate_score(
        near, days, False, significance, recalls
    )


@given(st.floats(1.0001, 1e6), st.floats(-1e6, -0.0001))
@PROPERTY
def test_candidate_score_clamps_significance_into_the_unit_interval(
    high: float, low: float
) -> None:
    assert candidate_score(0.3, 3, False, high, 2) == candidate_score(0.3, 3, False, 1.0, 2)
    assert candidate_score(0.3, 3, False, low, 2) == candidate_score(0.3, 3, False, 0.0, 2)


@given(st.floats(-1e4, 0))
@PROPERTY
def test_candidate_score_counts_negative_age_as_zero(days: float) -> None:
    assert candidate_score(0.5, days, True, 0.5, 1) == candidate_score(0.5, 0, True, 0.5, 1)


def test_candidate_score_recall_term_is_capped() -> None:
    uncapped = candidate_score(0.0, 0, False, 0.0, 10)
    assert uncapped == pytest.approx(1 + 0.006 * math.log(11))
    assert candidate_score(0.0, 0, False, 0.0, 10**9) == pytest.approx(1.025)


@pytest.mark.parametrize(
    "args, name",
    [
        ((2.5, 0, False, 0.5, 0), "must be within"),
        ((-0.1, 0, False, 0.5, 0), "must be within"),
        ((True, 0, False, 0.5, 0), "must be a number"),
        ((0.5, math.nan, False, 0.5, 0), "finite"),
        ((0.5, math.inf, False, 0.5, 0), "finite"),
        ((0.5, 0, False, math.nan, 0), "finite"),
        ((0.5, 0, False, 0.5, -1), ">= 0"),
        ((0.5, 0, False, 0.5, 1.0), "integer"),
        ((0.5, 0, False, 0.5, True), "integer"),
        ((0.5, 0, 1, 0.5, 0), "episode"),
    ],
)
def test_candidate_score_refuses_bad_arguments(args: tuple[object, ...], name: str) -> None:
    with pytest.raises(InvalidInputError, match=name):
        candidate_score(*args)  # type: ignore[arg-type]


# --- congruence ---------------------------------------------------------------------------


@given(signed(), signed(), st.booleans())
@PROPERTY
def test_mood_congruence_factor_boosts_only_a_shared_sign_when_switched_on(
    memory: float, mood: float, on: bool
) -> None:
    factor = mood_congruence_factor(memory, mood, on)
    congruent = on and memory != 0 and (memory > 0) == (mood > 0)
    if not congruent:
        assert factor == 1.0
    else:
        assert factor == (1.06 if mood < 0 else 1.03)


@pytest.mark.parametrize(
    ("memory", "mood", "expected"),
    [(0.5, 0.1999, 1.03), (-0.5, -0.1999, 1.06), (0.8, 0.01, 1.03), (-0.3, -0.05, 1.06)],
)
def test_mood_congruence_factor_trusts_its_flag_below_threshold(
    memory: float, mood: float, expected: float
) -> None:
    # The threshold belongs to score_candidate, which decides the flag; the factor obeys it.
    assert mood_congruence_factor(memory, mood, True) == expected
    assert mood_congruence_factor(memory, mood, False) == 1.0


@pytest.mark.parametrize("mood", [0.1999, -0.1999, 0.0])
def test_score_candidate_switches_congruence_off_below_the_threshold(mood: float) -> None:
    candidate = MemoryCandidate(id="m", text="t", distance=0.4, emotional_valence=-0.7)
    assert score_candidate(candidate, NOW, mood).congruence == 1.0
    assert score_candidate(candidate, NOW, -0.2).congruence == 1.06


# --- score_candidate and rank_candidates ----------------------------------------------------


@given(candidates(), signed(), st.booleans())
@PROPERTY
def test_score_candidate_is_the_product_of_its_breakdown(
    candidate: MemoryCandidate, mood: float, on: bool
) -> None:
    scored = score_candidate(candidate, NOW, mood, on)
    assert scored.candidate is candidate
    assert scored.score == pytest.approx(
        (scored.similarity * scored.recency * scored.salience + scored.episode_bonus)
        * scored.congruence
    )


@given(
    st.floats(0, 2),
    st.floats(-30, 200, allow_nan=False),
    st.booleans(),
    unit(),
    st.integers(0, 100),
    signed(),
)
@PROPERTY
def test_score_candidate_agrees_with_candidate_score_on_days(
    distance: float, days: float, episode: bool, significance: float, recalls: int, memory: float
) -> None:
    candidate = MemoryCandidate(
        id="m",
        text="",
        distance=distance,
        timestamp=(NOW - timedelta(days=days)).isoformat(),
        episode=episode,
        significance=significance,
        recall_count=recalls,
        emotional_valence=memory,
    )
    expected = candidate_score(distance, days, episode, significance, recalls)
    factor = mood_congruence_factor(memory, -0.5)
    assert score_candidate(candidate, NOW, -0.5).score == pytest.approx(expected * factor, abs=1e-9)


@given(st.lists(candidates(), max_size=12), signed(), st.integers(0, 15))
@PROPERTY
def test_rank_candidates_is_a_sorted_cut_of_the_deduplicated_ids(
    pool: list[MemoryCandidate], mood: float, limit: int
) -> None:
    ranked = rank_candidates(pool, NOW, mood, limit)
    ids = [item.candidate.id for item in ranked]
    assert len(ids) == len(set(ids)) == min(limit, len({c.id for c in pool}))
    keys = [(-item.score, item.candidate.id) for item in ranked]
    assert keys == sorted(keys)
    everything = rank_candidates(pool, NOW, mood, len(pool))
    assert sorted(item.candidate.id for item in everything) == sorted({c.id for c in pool})
    assert ranked == everything[:limit]


@given(st.lists(candidates(), min_size=1, max_size=12), signed())
@PROPERTY
def test_rank_candidates_dedupe_keeps_the_best_of_each_id(
    pool: list[MemoryCandidate], mood: float
) -> None:
    ranked = rank_candidates(pool, NOW, mood, len(pool))

    def alone(candidate: MemoryCandidate) -> float:  # the candidate's score on the same path
        return rank_candidates([candidate], NOW, mood, 1)[0].score

    for item in ranked:
        scores = [alone(c) for c in pool if c.id == item.candidate.id]
        assert item.score == max(scores)
        assert (
            abs(
                item.score
                - max(
                    score_candidate(c, NOW, mood).score for c in pool if c.id == item.candidate.id
                )
            )
            <= 1e-12
        )
        first_best = next(c for c in pool if c.id == item.candidate.id and alone(c) == max(scores))
        assert item.candidate is first_best


@given(st.lists(candidates(), max_size=10))
@PROPERTY
def test_rank_candidates_never_mutates_its_input(pool: list[MemoryCandidate]) -> None:
    before = [c.model_dump() for c in pool]
    rank_candidates(pool, NOW, 0.4)
    assert [c.model_dump() for c in pool] == before


def test_rank_candidates_breaks_ties_by_code_point_id() -> None:
    names = ["é", "a", "Z", "B", "aa", "_"]
    pool = [MemoryCandidate(id=name, text="", distance=0.5) for name in names]
    ranked = rank_candidates(pool, NOW, limit=10)
    assert [item.candidate.id for item in ranked] == ["B", "Z", "_", "a", "aa", "é"]


def test_rank_candidates_first_seen_wins_a_tie_and_higher_score_replaces() -> None:
    first = MemoryCandidate(id="m", distance=0.5, text="first")
    second = MemoryCandidate(id="m", distance=0.5, text="second")
    better = MemoryCandidate(id="m", distance=0.1, text="better")
    assert rank_candidates([first, second], NOW)[0].candidate.text == "first"
    assert rank_candidates([first, better, second], NOW)[0].candidate.text == "better"


def test_rank_candidates_default_limit_is_four_and_zero_is_empty() -> None:
    pool = [MemoryCandidate(id=str(i), text="", distance=i / 10) for i in range(8)]
    assert [item.candidate.id for item in rank_candidates(pool, NOW)] == ["0", "1", "2", "3"]
    assert rank_candidates(pool, NOW, limit=0) == ()


def test_rank_candidates_accepts_any_iterable() -> None:
    pool = (MemoryCandidate(id=str(i), text="", distance=0.2) for i in range(3))
    assert len(rank_candidates(pool, NOW)) == 3


@pytest.mark.parametrize("limit", [-1, True, 2.0, "4"])
def test_rank_candidates_refuses_a_bad_limit(limit: object) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        rank_candidates([], NOW, limit=limit)  # type: ignore[arg-type]


def test_rank_candidates_refuses_a_naive_now() -> None:
    with pytest.raises(InvalidInputError, match="now"):
        rank_candidates([], datetime(2026, 1, 1))


def test_congruence_changes_the_order_only_when_the_mood_is_clear() -> None:
    sad = MemoryCandidate(id="sad", text="", distance=0.40, emotional_valence=-0.8)
    happy = MemoryCandidate(id="happy", text="", distance=0.39, emotional_valence=0.8)
    assert [i.candidate.id for i in rank_candidates([sad, happy], NOW, -0.1)] == ["happy", "sad"]
    assert [i.candidate.id for i in rank_candidates([sad, happy], NOW, -0.5)] == ["sad", "happy"]
    off = rank_candidates([sad, happy], NOW, -0.5, congruence_on=False)
    assert [i.candidate.id for i in off] == ["happy", "sad"]


def test_retrieval_weights_refuse_meaningless_values() -> None:
    with pytest.raises(ValueError, match="recency_floor"):
        RetrievalWeights(recency_floor=1.5)
    with pytest.raises(ValueError, match="recency_horizon_days"):
        RetrievalWeights(recency_horizon_days=0.0)
    assert RetrievalWeights() == DEFAULT_RETRIEVAL_WEIGHTS


def test_naive_now_is_refused_even_for_a_zoned_timestamp() -> None:
    with pytest.raises(InvalidInputError):
        naive = datetime(2026, 1, 1, tzinfo=None)
        score_candidate(MemoryCandidate(id="x", text="", distance=0.1), naive)
    aware = datetime(2026, 1, 1, tzinfo=UTC)
    assert score_candidate(MemoryCandidate(id="x", text="", distance=0.0), aware).recency == 0.70
