"""Columnar scoring and ranking equal the scalar reference: same order always, same bits.

``rank_candidates`` ages from epoch seconds (the path a recall takes), so it equals the scalar
reference bit for bit for timestamps in whole seconds and within 1e-12 otherwise.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affect_memory.kernel import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    BatchScores,
    CandidateColumns,
    InvalidInputError,
    MemoryCandidate,
    RetrievalWeights,
    candidate_columns,
    rank_batch,
    rank_candidates,
    rank_columns,
    score_batch,
    score_candidate,
)
from affect_memory.kernel.bounds import parse_zoned
from affect_memory.kernel.retrieval import age_days, rank_candidates_reference

NOW = datetime(2026, 12, 1, 7, 30, tzinfo=UTC)
DAY = 86400.0

fast = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- strategies

ids = st.text(alphabet="ab\u00e9\U0001f600\ud7ff\x00", min_size=1, max_size=2)
"""Few, clashing ids: duplicates, astral characters, and a NUL that numpy would strip."""

distances = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(0.0, 2.0, allow_subnormal=False)
)

age_seconds = st.one_of(
    st.sampled_from([0.0, 36 * DAY, 60 * DAY, 30 * DAY, -DAY, 1e-6, 90 * DAY]),
    st.integers(-10 * 86400, 200 * 86400).map(float),
    st.floats(-30 * DAY, 400 * DAY),
)
zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)

timestamps = st.one_of(
    st.none(),
    st.builds(
        lambda seconds, zone: (NOW - timedelta(seconds=seconds)).astimezone(zone).isoformat(),
        age_seconds,
        zones,
    ),
    st.sampled_from(["not a date", "2026-11-30T12:00:00", "", "2026-13-01T00:00:00Z"]),
)
"""Zoned ISO strings (past, future, exactly at the boundaries), missing, and unusable ones."""

significances = st.one_of(st.sampled_from([0.0, 1.0, -0.5, 1.5]), st.floats(-2.0, 3.0))
recall_counts = st.one_of(
    st.sampled_from([0, 1, 2, 63, 64, 65, 10**6, 2**40]), st.integers(0, 300)
)
valences = st.one_of(st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.0]), st.floats(-1.0, 1.0))
moods = st.one_of(
    st.sampled_from([0.0, 0.2, -0.2, 0.19999999999999998, -0.19999999999999998, 1.0, -1.0]),
    st.floats(-1.0, 1.0),
)


whole_second_timestamps = st.one_of(
    st.none(),
    st.builds(
        lambda seconds, zone: (NOW - timedelta(seconds=seconds)).astimezone(zone).isoformat(),
        st.integers(-10 * 86400, 200 * 86400),
        zones,
    ),
)
"""Zoned ISO strings in whole seconds, whose epoch seconds are exact floats."""


@st.composite
def candidates(
    draw: st.DrawFn, stamps: st.SearchStrategy[str | None] = timestamps
) -> MemoryCandidate:
    """A candidate; out-of-range significance and unusable timestamps bypass validation."""
    # The scalar path accepts these through ``model_construct``; the batch must agree.
    return MemoryCandidate.model_construct(
        id=draw(ids),
        text="",
        distance=draw(distances),
        timestamp=draw(stamps),
        significance=draw(significances),
        recall_count=draw(recall_counts),
        episode=draw(st.booleans()),
        emotional_valence=draw(valences),
    )


pools = st.lists(candidates(), max_size=40)
whole_second_pools = st.lists(candidates(whole_second_timestamps), max_size=40)


def columns(pool: list[MemoryCandidate]) -> dict[str, Any]:
    """The batch columns of a pool, ages computed exactly as the scalar path computes them."""
    ages = [age_days(candidate.timestamp, NOW) for candidate in pool]
    return {
        "distances": np.array([c.distance for c in pool], dtype=float),
        "ages_days": np.array([math.nan if a is None else a for a in ages], dtype=float),
        "significance": np.array([c.significance for c in pool], dtype=float),
        "recall_counts": np.array([c.recall_count for c in pool], dtype=np.int64),
        "episodes": np.array([c.episode for c in pool], dtype=bool),
        "memory_valences": np.array([c.emotional_valence for c in pool], dtype=float),
    }


def epoch(timestamp: object) -> float:
    """Epoch seconds of a usable timestamp, NaN otherwise (as a store would keep it)."""
    try:
        return parse_zoned(timestamp).timestamp()  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return math.nan


def full_sort_reference(keys: list[str], scores: list[float], limit: int) -> list[int]:
    """Best of each id (first seen wins a tie), then descending score, ascending id; cut."""
    best: dict[str, int] = {}
    for index, (key, score) in enumerate(zip(keys, scores, strict=True)):
        if key not in best or score > scores[best[key]]:
            best[key] = index
    return sorted(best.values(), key=lambda index: (-scores[index], keys[index]))[:limit]


# ---------------------------------------------------------------- equal to the scalar path


@fast
@given(whole_second_pools, moods, st.booleans(), st.integers(0, 12))
def test_rank_candidates_equals_scalar_reference_exactly_in_whole_seconds(
    pool: list[MemoryCandidate], mood: float, congruence_on: bool, limit: int
) -> None:
    columnar = rank_candidates(pool, NOW, mood, limit, congruence_on)
    scalar = rank_candidates_reference(pool, NOW, mood, limit, congruence_on)
    assert [item.candidate.id for item in columnar] == [item.candidate.id for item in scalar]
    assert columnar == scalar  # same candidates, same scores and factors, bit for bit


@fast
@given(pools, moods, st.booleans(), st.integers(0, 12))
def test_rank_candidates_ranks_the_epoch_columns_and_agrees_with_the_reference(
    pool: list[MemoryCandidate], mood: float, congruence_on: bool, limit: int
) -> None:
    columnar = rank_candidates(pool, NOW, mood, limit, congruence_on)
    cols = columns(pool)
    del cols["ages_days"]
    moments = np.array([epoch(c.timestamp) for c in pool], dtype=float)
    batch = score_batch(
        **cols, timestamps=moments, now=NOW, mood_valence=mood, congruence_on=congruence_on
    )
    order = rank_batch([c.id for c in pool], batch.score, limit).tolist()
    assert [item.candidate for item in columnar] == [pool[i] for i in order]
    assert [item.score for item in columnar] == [batch.score[i] for i in order]  # exactly
    reference = rank_candidates_reference(pool, NOW, mood, len(pool), congruence_on)
    best = {item.candidate.id: item.score for item in reference}
    for item in columnar:
        assert abs(item.score - best[item.candidate.id]) <= 1e-12


@fast
@given(pools, moods, st.booleans())
def test_every_batch_factor_equals_score_candidate_bit_for_bit(
    pool: list[MemoryCandidate], mood: float, congruence_on: bool
) -> None:
    batch = score_batch(**columns(pool), mood_valence=mood, congruence_on=congruence_on)
    for index, candidate in enumerate(pool):
        scalar = score_candidate(candidate, NOW, mood, congruence_on)
        assert batch.score[index] == scalar.score
        assert batch.similarity[index] == scalar.similarity
        assert batch.recency[index] == scalar.recency
        assert batch.salience[index] == scalar.salience
        assert batch.congruence[index] == scalar.congruence
        assert batch.episode_bonus[index] == scalar.episode_bonus


@fast
@given(pools, moods)
def test_epoch_timestamps_agree_with_the_scalar_path_within_1e_12(
    pool: list[MemoryCandidate], mood: float
) -> None:
    cols = columns(pool)
    del cols["ages_days"]
    moments = np.array([epoch(c.timestamp) for c in pool], dtype=float)
    batch = score_batch(**cols, timestamps=moments, now=NOW, mood_valence=mood)
    for index, candidate in enumerate(pool):
        scalar = score_candidate(candidate, NOW, mood)
        assert abs(batch.score[index] - scalar.score) <= 1e-12
        whole_seconds = math.isnan(moments[index]) or moments[index].is_integer()
        if whole_seconds:  # float epoch seconds are exact, so the bits are too
            assert batch.score[index] == scalar.score


@fast
@given(pools)
def test_epoch_path_equals_ages_path_exactly(pool: list[MemoryCandidate]) -> None:
    cols = columns(pool)
    del cols["ages_days"]
    moments = np.array([epoch(c.timestamp) for c in pool], dtype=float)
    from_epoch = score_batch(**cols, timestamps=moments, now=NOW)
    from_ages = score_batch(**cols, ages_days=(NOW.timestamp() - moments) / DAY)
    np.testing.assert_array_equal(from_epoch.score, from_ages.score)
    np.testing.assert_array_equal(from_epoch.recency, from_ages.recency)


def test_large_pools_take_the_partition_path_and_still_match() -> None:
    rng = np.random.default_rng(7)
    keys = [f"m{k}" for k in rng.integers(0, 300, 3000)]
    pool = [
        MemoryCandidate(
            id=key,
            text="",
            distance=float(rng.choice([0.2, 0.4, rng.uniform(0, 2)])),
            timestamp=(NOW - timedelta(days=float(rng.integers(-3, 90)))).isoformat(),
            significance=float(rng.choice([0.0, 0.5])),
            recall_count=int(rng.integers(0, 100)),
            episode=bool(rng.random() < 0.2),
            emotional_valence=float(rng.choice([-0.5, 0.0, 0.5])),
        )
        for key in keys
    ]
    for mood in (-0.6, 0.2):
        reference = rank_candidates_reference(pool, NOW, mood, len(pool))
        for limit in (0, 1, 6, 64, 299, 300, 301, 5000):
            assert rank_candidates(pool, NOW, mood, limit) == reference[:limit]


# ---------------------------------------------------------------- rank_batch


score_values = st.one_of(
    st.sampled_from([0.0, 0.25, 0.5, 1.0, -0.0]), st.floats(-10, 10, allow_subnormal=False)
)


@fast
@given(
    st.lists(st.tuples(ids, score_values), max_size=60),
    st.integers(0, 70),
    st.booleans(),
)
def test_rank_batch_equals_a_full_sort(
    rows: list[tuple[str, float]], limit: int, as_numpy: bool
) -> None:
    keys = [key for key, _ in rows]
    scores = [score for _, score in rows]
    given_ids: Any = keys
    if as_numpy and not any(key.endswith("\x00") for key in keys):
        given_ids = np.array(keys, dtype=str) if keys else np.array([], dtype="U1")
    assert rank_batch(given_ids, scores, limit).tolist() == full_sort_reference(
        keys, scores, limit
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(513, 4000),
    st.integers(1, 400),
    st.sampled_from([3, 40, 10_000]),
    st.integers(1, 8),
)
def test_rank_batch_partition_path_handles_boundary_ties_and_duplicates(
    seed: int, n: int, distinct: int, levels: int, limit_scale: int
) -> None:
    rng = np.random.default_rng(seed)
    keys = [f"k{k:03d}" for k in rng.integers(0, distinct, n)]
    scores = (rng.integers(0, levels, n) / levels).tolist()  # heavy ties at every boundary
    limit = int(rng.integers(1, 8 * limit_scale))
    expected = full_sort_reference(keys, scores, limit)
    assert rank_batch(np.array(keys), scores, limit).tolist() == expected
    assert rank_batch(keys, np.array(scores), limit).tolist() == expected


@fast
@given(st.lists(st.tuples(ids, score_values), min_size=1, max_size=60), st.integers(1, 70))
def test_dedupe_keeps_the_best_and_the_first_seen_on_a_tie(
    rows: list[tuple[str, float]], limit: int
) -> None:
    keys = [key for key, _ in rows]
    scores = [score for _, score in rows]
    chosen = rank_batch(keys, scores, limit).tolist()
    assert len({keys[i] for i in chosen}) == len(chosen)
    for index in chosen:
        group = [i for i, key in enumerate(keys) if key == keys[index]]
        best = max(scores[i] for i in group)
        assert scores[index] == best
        assert index == min(i for i in group if scores[i] == best)


@fast
@given(st.lists(st.tuples(ids, score_values), max_size=60), st.integers(0, 70), st.randoms())
def test_permuting_the_input_does_not_change_the_ranked_ids_or_scores(
    rows: list[tuple[str, float]], limit: int, random: Any
) -> None:
    shuffled = list(rows)
    random.shuffle(shuffled)

    def ranked(items: list[tuple[str, float]]) -> list[tuple[str, float]]:
        chosen = rank_batch([k for k, _ in items], [s for _, s in items], limit)
        return [items[i] for i in chosen.tolist()]

    assert ranked(rows) == ranked(shuffled)


def test_ties_order_by_code_point_not_by_locale_or_utf16() -> None:
    keys = ["b", "\U0001f600", "\uff5e", "B", "a\x00", "a", "é"]
    order = rank_batch(keys, [1.0] * len(keys), 10).tolist()
    assert [keys[i] for i in order] == sorted(keys)


def test_rank_batch_of_nothing_and_limit_zero() -> None:
    assert rank_batch([], [], 5).tolist() == []
    assert rank_batch(["a"], [1.0], 0).tolist() == []


# ---------------------------------------------------------------- closed forms and invariances


def one(**overrides: Any) -> BatchScores:
    """Score a single candidate with neutral features unless overridden."""
    values: dict[str, Any] = {
        "distances": [0.0],
        "ages_days": [0.0],
        "significance": [0.0],
        "recall_counts": [0],
        "episodes": [False],
        "memory_valences": [0.0],
    }
    options = {k: overrides.pop(k) for k in list(overrides) if k not in values}
    values.update({k: [v] for k, v in overrides.items()})
    if values["ages_days"] == [None]:
        del values["ages_days"]
    return score_batch(**values, **options)


@pytest.mark.parametrize(
    ("age", "recency"),
    [(0.0, 1.0), (-5.0, 1.0), (30.0, 0.5), (36.0, 0.4), (60.0, 0.4), (1e6, 0.4), (math.nan, 0.7)],
)
def test_recency_closed_form(age: float, recency: float) -> None:
    assert one(ages_days=age).recency[0] == pytest.approx(recency, abs=1e-15)


def test_no_timestamps_at_all_gives_the_fallback() -> None:
    assert one(ages_days=None).recency.tolist() == [0.7]


@pytest.mark.parametrize(
    ("significance", "recall", "salience"),
    [
        (0.0, 0, 1.0),
        (1.0, 0, 1.03),
        (2.5, 0, 1.03),
        (-1.0, 0, 1.0),
        (0.0, 1, 1.0 + 0.006 * math.log1p(1)),
        (0.0, 10**9, 1.025),
        (1.0, 2**62, 1.055),
    ],
)
def test_salience_closed_form(significance: float, recall: int, salience: float) -> None:
    assert one(significance=significance, recall_counts=recall).salience[0] == pytest.approx(
        salience, abs=1e-15
    )


@pytest.mark.parametrize(
    ("mood", "valence", "on", "factor"),
    [
        (-0.2, -0.1, True, 1.06),
        (0.2, 0.3, True, 1.03),
        (-0.9, 0.3, True, 1.0),
        (0.9, 0.0, True, 1.0),
        (-0.9, 0.0, True, 1.0),
        (0.19, 0.5, True, 1.0),
        (-0.9, -0.5, False, 1.0),
    ],
)
def test_congruence_closed_form(mood: float, valence: float, on: bool, factor: float) -> None:
    result = one(memory_valences=valence, mood_valence=mood, congruence_on=on)
    assert result.congruence[0] == factor
    assert result.score[0] == factor


def test_worked_example() -> None:
    # distance 0.5, 30 days, significance 0.5, 3 recalls, an episode, congruent in a low mood.
    result = one(
        distances=0.5,
        ages_days=30.0,
        significance=0.5,
        recall_counts=3,
        episodes=True,
        memory_valences=-0.4,
        mood_valence=-0.5,
    )
    salience = 1 + 0.03 * 0.5 + min(0.025, 0.006 * math.log1p(3))
    assert result.score[0] == pytest.approx((0.75 * 0.5 * salience + 0.05) * 1.06, abs=1e-15)
    assert result.episode_bonus[0] == 0.05


def test_shifting_every_age_by_the_same_amount_equals_shifting_now() -> None:
    rng = np.random.default_rng(3)
    n = 200
    moments = NOW.timestamp() - rng.integers(-5, 100, n) * DAY
    common = {
        "distances": rng.uniform(0, 2, n),
        "significance": rng.random(n),
        "recall_counts": rng.integers(0, 80, n),
        "episodes": rng.random(n) < 0.3,
        "memory_valences": rng.uniform(-1, 1, n),
    }
    later = score_batch(**common, timestamps=moments, now=NOW + timedelta(days=7))
    shifted = score_batch(**common, timestamps=moments - 7 * DAY, now=NOW)
    np.testing.assert_array_equal(later.score, shifted.score)


def test_results_are_read_only_and_inputs_untouched() -> None:
    distances = np.array([-1e-7, 1.0, 2.0 + 1e-7])
    ages = np.array([1.0, math.nan, -3.0])
    result = score_batch(
        distances,
        ages_days=ages,
        significance=[0.0, 0.5, 1.0],
        recall_counts=[0, 1, 2],
        episodes=[True, False, True],
        memory_valences=[0.1, -0.1, 0.0],
        mood_valence=0.5,
    )
    assert distances.tolist() == [-1e-7, 1.0, 2.0 + 1e-7]
    assert np.isnan(ages[1]) and ages[2] == -3.0
    assert result.similarity.tolist() == [1.0, 0.5, 0.0]  # float noise clamped into [0, 2]
    assert len(result) == 3
    for name in ("score", "similarity", "recency", "salience", "congruence", "episode_bonus"):
        array = getattr(result, name)
        assert array.dtype == np.float64 and not array.flags.writeable


def test_empty_batch() -> None:
    result = score_batch(
        [], ages_days=[], significance=[], recall_counts=np.array([], dtype=int),
        episodes=np.array([], dtype=bool), memory_valences=[],
    )
    assert len(result) == 0 and result.score.dtype == np.float64


@pytest.mark.parametrize(
    "weights",
    [
        RetrievalWeights(recall_weight=1e-6, recall_cap=1.0),  # never capped in practice
        RetrievalWeights(recall_weight=0.0, recall_cap=0.5),  # flat, never capped
        RetrievalWeights(recall_weight=0.5, recall_cap=0.0),  # capped from the start
        DEFAULT_RETRIEVAL_WEIGHTS,
    ],
)
def test_unusual_recall_weights_match_the_scalar_formula(weights: RetrievalWeights) -> None:
    counts = np.array([0, 1, 5, 63, 64, 4095, 4096, 10**5, 10**7, 2**50], dtype=np.uint64)
    result = score_batch(
        np.zeros(counts.size),
        ages_days=np.zeros(counts.size),
        significance=np.zeros(counts.size),
        recall_counts=counts,
        episodes=np.zeros(counts.size, dtype=bool),
        memory_valences=np.zeros(counts.size),
        weights=weights,
    )
    expected = [
        1.0 + 0.0 + min(weights.recall_cap, weights.recall_weight * math.log1p(int(c)))
        for c in counts
    ]
    assert result.salience.tolist() == expected


# ---------------------------------------------------------------- validation names the argument


def valid() -> dict[str, Any]:
    return {
        "distances": [0.1, 0.2],
        "ages_days": [1.0, 2.0],
        "significance": [0.1, 0.2],
        "recall_counts": [0, 1],
        "episodes": [False, True],
        "memory_valences": [0.0, 0.5],
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"distances": [0.1, math.nan]}, "distances must be cosine distances"),
        ({"distances": [0.1, 2.1]}, "distances must be cosine distances"),
        ({"distances": [-0.01, 0.1]}, "distances must be cosine distances"),
        ({"distances": [True, False]}, "distances must be a numeric array"),
        ({"distances": [[0.1, 0.2]]}, "distances must be a 1-D array"),
        ({"significance": [0.1, math.inf]}, "significance must be finite"),
        ({"memory_valences": [math.nan, 0.0]}, "memory_valences must be finite"),
        ({"recall_counts": [0, -1]}, "recall_counts must be >= 0"),
        ({"recall_counts": [0.0, 1.0]}, "recall_counts must be an integer array"),
        ({"episodes": [0, 1]}, "episodes must be a bool array"),
        ({"episodes": [True]}, "episodes has 1 values but distances has 2"),
        ({"ages_days": [1.0, math.inf]}, "ages_days must be finite"),
        ({"timestamps": [1.0, 2.0]}, "give timestamps or ages_days, not both"),
        ({"mood_valence": math.nan}, "mood_valence must be finite"),
        ({"mood_valence": True}, "mood_valence must be a number"),
        ({"congruence_on": 1}, "congruence_on must be a bool"),
        ({"weights": {}}, "weights must be RetrievalWeights"),
    ],
)
def test_score_batch_refuses_bad_columns(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        score_batch(**{**valid(), **change})


def test_timestamps_need_a_zoned_now() -> None:
    args = valid()
    del args["ages_days"]
    with pytest.raises(InvalidInputError, match="timestamps need now"):
        score_batch(**args, timestamps=[1.0, 2.0])
    with pytest.raises(InvalidInputError, match="now must be a zoned datetime"):
        score_batch(**args, timestamps=[1.0, 2.0], now=datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError, match="timestamps must be finite"):
        score_batch(**args, timestamps=[1.0, -math.inf], now=NOW)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([1, 2], [0.1, 0.2], 1), "ids must be strings"),
        ((["a"], [0.1, 0.2], 1), "scores has 2 values but ids has 1"),
        ((["a", "b"], [0.1, math.nan], 1), "scores must be finite"),
        ((["a"], [0.1], -1), "limit must be >= 0"),
        ((["a"], [0.1], True), "limit must be an integer"),
        ((np.array([["a"]]), [0.1], 1), "ids must be a 1-D array"),
    ],
)
def test_rank_batch_refuses_bad_input(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        rank_batch(*args)


# ---------------------------------------------------------------- blocks


def test_blocks_do_not_change_any_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    from affect_memory import kernel

    rng = np.random.default_rng(11)
    n = 1000
    moments = np.round(NOW.timestamp() - rng.uniform(-5 * DAY, 100 * DAY, n), 3)
    moments[rng.random(n) < 0.1] = math.nan
    common: dict[str, Any] = {
        "distances": rng.uniform(0, 2, n),
        "timestamps": moments,
        "significance": rng.uniform(-0.5, 1.5, n),
        "recall_counts": rng.integers(0, 100, n),
        "episodes": rng.random(n) < 0.3,
        "memory_valences": rng.choice([-0.5, 0.0, 0.5], n),
        "now": NOW,
        "mood_valence": 0.3,
    }
    whole = score_batch(**common)
    monkeypatch.setattr(kernel.batch, "_BLOCK", 7)
    blocked = score_batch(**common)
    for name in ("score", "similarity", "recency", "salience", "congruence", "episode_bonus"):
        np.testing.assert_array_equal(getattr(blocked, name), getattr(whole, name))
    common["distances"][996] = 2.5
    with pytest.raises(InvalidInputError, match=r"got 2\.5 at index 996"):
        score_batch(**common)


def test_a_batch_longer_than_a_block_matches_the_scalar_path() -> None:
    rng = np.random.default_rng(5)
    n = 150_000
    ages = rng.uniform(-3, 90, n)
    ages[rng.random(n) < 0.05] = math.nan
    cols: dict[str, Any] = {
        "distances": rng.uniform(0, 2, n),
        "ages_days": ages,
        "significance": rng.random(n),
        "recall_counts": rng.integers(0, 100, n),
        "episodes": rng.random(n) < 0.2,
        "memory_valences": rng.uniform(-1, 1, n),
    }
    result = score_batch(**cols, mood_valence=-0.7)
    for index in rng.choice(n, 300, replace=False).tolist():
        age = cols["ages_days"][index]
        candidate = MemoryCandidate(
            id="x",
            text="",
            distance=cols["distances"][index],
            timestamp=None if math.isnan(age) else (NOW - timedelta(days=age)).isoformat(),
            significance=cols["significance"][index],
            recall_count=int(cols["recall_counts"][index]),
            episode=bool(cols["episodes"][index]),
            emotional_valence=cols["memory_valences"][index],
        )
        assert abs(result.score[index] - score_candidate(candidate, NOW, -0.7).score) <= 1e-12
    keys = np.array([f"m{i}" for i in range(n)])
    assert rank_batch(keys, result.score, 10).tolist() == full_sort_reference(
        keys.tolist(), result.score.tolist(), 10
    )


@pytest.mark.parametrize(
    "layout", ["random", "ascending", "descending", "all equal", "few levels", "duplicated"]
)
@pytest.mark.parametrize("limit", [1, 6, 256, 257])
def test_top_k_threshold_from_block_maxima_is_exact(layout: str, limit: int) -> None:
    rng = np.random.default_rng(limit)
    n = 20_011  # not a multiple of the block count, so there is a tail block
    scores = {
        "random": rng.random(n),
        "ascending": np.linspace(0, 1, n),
        "descending": np.linspace(1, 0, n),
        "all equal": np.full(n, 0.5),
        "few levels": rng.integers(0, 3, n) / 2,
        "duplicated": rng.random(n),
    }[layout]
    keys = [f"m{i % 50}" if layout == "duplicated" else f"m{i}" for i in range(n)]
    assert rank_batch(np.array(keys), scores, limit).tolist() == full_sort_reference(
        keys, scores.tolist(), limit
    )


# ---------------------------------------------------------------- rank_columns



def test_rank_columns_is_the_path_rank_candidates_takes() -> None:
    pool = [
        MemoryCandidate(id=f"m{i}", text="", distance=0.1 * i, timestamp="2026-11-01T00:00:00Z")
        for i in range(5)
    ]
    ranked = rank_columns(candidate_columns(pool), NOW, mood_valence=0.3, limit=3)
    assert ranked.order == (0, 1, 2)
    expected = rank_candidates(pool, NOW, 0.3, 3)
    assert [ranked.scores.score[i] for i in ranked.order] == [item.score for item in expected]
    assert len(ranked.scores) == 5  # every candidate is scored, the order is cut


def test_candidate_columns_need_one_value_per_id() -> None:
    columns = candidate_columns([MemoryCandidate(id="a", text="", distance=0.1)])
    with pytest.raises(InvalidInputError, match="one value per id"):
        CandidateColumns(
            ids=["a", "b"],
            distances=columns.distances,
            epochs=columns.epochs,
            significance=columns.significance,
            recall_counts=columns.recall_counts,
            episodes=columns.episodes,
            valences=columns.valences,
        )


def test_rank_columns_refuses_what_it_cannot_trust() -> None:
    with pytest.raises(InvalidInputError, match="columns must be CandidateColumns"):
        rank_columns({"ids": []}, NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="now must be a zoned datetime"):
        rank_columns(candidate_columns([]), datetime(2026, 1, 1))
    garbage = MemoryCandidate.model_construct(
        id="x", text="", distance=math.nan, timestamp=None, significance=0.5,
        recall_count=0, episode=False, emotional_valence=0.0,
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match="scores must be finite"):
        rank_columns(candidate_columns([garbage]), NOW)


def test_an_empty_pool_ranks_to_nothing() -> None:
    ranked = rank_columns(candidate_columns([]), NOW, limit=6)
    assert ranked.order == () and len(ranked.scores) == 0


# ---------------------------------------------------------------- ages a retriever decided


def _aged(ident: str, distance: float, stamp: str, age: float | None) -> MemoryCandidate:
    return MemoryCandidate(id=ident, text="", distance=distance, timestamp=stamp, age_days=age)


def test_a_candidates_own_age_replaces_its_calendar_age_on_every_path() -> None:
    pool = [
        _aged("old-but-current", 0.4, "2025-01-01T00:00:00Z", 0.0),
        _aged("new-but-stale", 0.3, "2026-11-30T00:00:00Z", 90.0),
        _aged("calendar", 0.5, "2026-11-01T00:00:00Z", None),
    ]
    fast_path = rank_candidates(pool, NOW, 0.0, 3)
    reference = rank_candidates_reference(pool, NOW, 0.0, 3)
    assert [item.candidate.id for item in fast_path] == [
        "old-but-current",
        "calendar",
        "new-but-stale",
    ]
    assert [(i.candidate.id, i.score, i.recency) for i in fast_path] == [
        (i.candidate.id, i.score, i.recency) for i in reference
    ]
    by_id = {item.candidate.id: item for item in fast_path}
    assert by_id["old-but-current"].recency == 1.0
    assert by_id["new-but-stale"].recency == DEFAULT_RETRIEVAL_WEIGHTS.recency_floor
    # The candidate without an age is aged by the calendar, with the same bits as before.
    plain = rank_candidates([pool[2]], NOW, 0.0, 1)[0]
    assert by_id["calendar"].score == plain.score


def test_columns_carry_ages_only_when_a_candidate_has_one() -> None:
    calendar = candidate_columns([_aged("a", 0.1, "2026-11-01T00:00:00Z", None)])
    assert calendar.ages_days is None
    with pytest.raises(InvalidInputError, match="need now"):
        candidate_columns([_aged("a", 0.1, "2026-11-01T00:00:00Z", 3.0)])
    stamp = "2026-11-01T00:00:00Z"
    aged = candidate_columns([_aged("a", 0.1, stamp, 3.0), _aged("b", 0.1, stamp, None)], now=NOW)
    assert aged.ages_days is not None
    assert aged.ages_days.tolist() == [3.0, (NOW.timestamp() - aged.epochs[1]) / DAY]
    with pytest.raises(InvalidInputError, match="one value per id"):
        CandidateColumns(
            ids=["a"],
            distances=aged.distances,
            epochs=aged.epochs,
            significance=aged.significance,
            recall_counts=aged.recall_counts,
            episodes=aged.episodes,
            valences=aged.valences,
            ages_days=np.zeros(2),
        )


def test_an_age_must_be_a_finite_number_of_days_not_negative() -> None:
    for bad in (-1.0, math.inf, math.nan, True):
        with pytest.raises(ValueError, match="age_days"):
            MemoryCandidate(id="a", text="", distance=0.1, age_days=bad)
