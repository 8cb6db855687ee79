"""The pruned fetch ranks exactly as ranking the whole pool would, reading fewer rows."""

from itertools import pairwise

import numpy as np
import pytest

from affect_memory.kernel.batch import rank_batch, score_batch
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from affect_memory.memory.recall.pruning import (
    RankedPrefix,
    first_fetch,
    rank_exactly,
    score_ceilings,
)


@pytest.mark.parametrize("mood", [-0.9, 0.0, 0.6])
def test_a_ceiling_is_the_best_score_its_unknown_fields_allow(mood: float) -> None:
    rng = np.random.default_rng(3)
    n = 200
    distances, ages = rng.uniform(0, 2, n), rng.uniform(0, 300, n)
    counts = rng.integers(0, 40, n)
    ceilings = score_ceilings(distances, ages, counts, DEFAULT_RETRIEVAL_WEIGHTS, mood_valence=mood)
    for _ in range(20):  # any significance, episode flag and valence stays under the ceiling
        actual = score_batch(
            distances,
            ages_days=ages,
            significance=rng.random(n),
            recall_counts=counts,
            episodes=rng.random(n) < 0.5,
            memory_valences=rng.uniform(-1, 1, n),
            mood_valence=mood,
        ).score
        assert np.all(actual <= ceilings)
    best = score_batch(
        distances, ages_days=ages, significance=np.ones(n), recall_counts=counts,
        episodes=np.ones(n, dtype=bool), memory_valences=np.full(n, -1.0 if mood < 0 else 1.0),
        mood_valence=mood,
    ).score  # fmt: skip
    assert ceilings == pytest.approx(best, abs=1e-8)  # and it is reached: the bound is tight


def test_an_unknown_age_is_taken_as_fresh() -> None:
    ceilings = score_ceilings(
        np.array([0.5, 0.5]), np.array([np.nan, 0.0]), np.zeros(2, dtype=np.int64),
        DEFAULT_RETRIEVAL_WEIGHTS, mood_valence=0.0,
    )  # fmt: skip
    assert ceilings[0] == ceilings[1]


@pytest.mark.parametrize("seed", range(20))
def test_pruned_ranking_equals_the_whole_pools(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, limit = int(rng.integers(1, 300)), int(rng.integers(1, 12))
    ids = [f"m{i:03d}" for i in range(n)]
    distances = rng.uniform(0, 2, n)
    ages = rng.uniform(0, 400, n)
    counts = rng.integers(0, 50, n)
    significance = rng.random(n)
    episodes = rng.random(n) < 0.2
    valences = rng.uniform(-1, 1, n)
    # Heavy significance and episode weights: what is unknown before a fetch matters a lot,
    # so the fetch order and the final order differ and stopping early would show.
    weights = RetrievalWeights(
        recency_horizon_days=120.0, recency_floor=0.1, significance_weight=1.0, episode_bonus=0.4
    )
    mood = float(rng.uniform(-1, 1))

    def scores(rows: np.ndarray) -> np.ndarray:
        return score_batch(
            distances[rows], ages_days=ages[rows], significance=significance[rows],
            recall_counts=counts[rows], episodes=episodes[rows], memory_valences=valences[rows],
            mood_valence=mood, weights=weights,
        ).score  # fmt: skip

    ceilings = score_ceilings(distances, ages, counts, weights, mood_valence=mood)
    order = np.lexsort((np.arange(n), -ceilings))
    fetched: list[int] = []

    def rank_first(count: int) -> RankedPrefix[list[str]]:
        fetched.append(count)
        rows = order[:count]
        score = scores(rows)
        chosen = rank_batch([ids[i] for i in rows], score, limit)
        kth = float(score[chosen[-1]]) if len(chosen) >= limit else -np.inf
        return RankedPrefix([ids[rows[i]] for i in chosen], len(chosen), kth)

    prefix = rank_exactly(ceilings[order], rank_first, limit=limit, first=first_fetch(limit))
    whole = [ids[i] for i in rank_batch(ids, scores(np.arange(n)), limit)]
    assert prefix.ranked == whole
    assert fetched[0] == min(n, first_fetch(limit))
    assert all(later == min(n, 2 * earlier) for earlier, later in pairwise(fetched))


def test_the_first_batch_is_k_and_a_margin() -> None:
    assert (first_fetch(1), first_fetch(6), first_fetch(10), first_fetch(64)) == (7, 12, 16, 96)


@pytest.mark.parametrize("mood", [-0.9, 0.0, 0.6])
def test_a_member_whose_fields_are_known_has_its_own_score_as_ceiling(mood: float) -> None:
    rng = np.random.default_rng(5)
    n = 120
    distances, ages = rng.uniform(0, 2, n), rng.uniform(0, 300, n)
    counts = rng.integers(0, 40, n)
    significance, valences = rng.random(n), rng.uniform(-1, 1, n)
    episodes, known = rng.random(n) < 0.3, rng.random(n) < 0.5
    ceilings = score_ceilings(
        distances, ages, counts, DEFAULT_RETRIEVAL_WEIGHTS, mood_valence=mood, known=known,
        significance=significance, episodes=episodes, valences=valences,
    )  # fmt: skip
    actual = score_batch(
        distances, ages_days=ages, significance=significance, recall_counts=counts,
        episodes=episodes, memory_valences=valences, mood_valence=mood,
    ).score  # fmt: skip
    unknown = score_ceilings(distances, ages, counts, DEFAULT_RETRIEVAL_WEIGHTS, mood_valence=mood)
    assert ceilings[known] == pytest.approx(actual[known], abs=1e-8)
    assert np.all(actual[known] < ceilings[known])
    assert np.array_equal(ceilings[~known], unknown[~known])
