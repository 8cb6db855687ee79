"""The pruned fetch ranks exactly as ranking the whole pool would, reading fewer rows."""

from itertools import pairwise

import numpy as np
import pytest

from kernel.batch import rank_batch, score_batch
from kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from plugin.memory.pruning import RankedPrefix, rank_exactly, score_ceiling


def test_the_ceiling_is_the_best_score_a_relevance_can_reach() -> None:
    weights = DEFAULT_RETRIEVAL_WEIGHTS
    best = score_batch(
        [2.0 * (1.0 - 0.8)],
        ages_days=[0.0],
        significance=[1.0],
        recall_counts=[10**6],
        episodes=[True],
        memory_valences=[-1.0],
        mood_valence=-0.9,
        weights=weights,
    ).score[0]
    ceiling = score_ceiling(0.8, weights, mood_valence=-0.9)
    assert best <= ceiling < best + 1e-8
    assert score_ceiling(0.8, weights, mood_valence=0.0) < ceiling  # no congruence for a calm mood
    assert score_ceiling(0.8, weights, mood_valence=-0.9, congruence_on=False) < ceiling


@pytest.mark.parametrize("seed", range(20))
def test_pruned_ranking_equals_the_whole_pools(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, limit = int(rng.integers(1, 300)), int(rng.integers(1, 12))
    relevance = np.sort(rng.random(n))[::-1]
    ids = [f"m{i:03d}" for i in range(n)]
    ages = rng.uniform(0, 400, n)
    significance = rng.random(n)
    counts = rng.integers(0, 50, n)
    episodes = rng.random(n) < 0.2
    weights = RetrievalWeights(recency_horizon_days=120.0, recency_floor=0.1)

    def scores(count: int) -> np.ndarray:
        return score_batch(
            2.0 * (1.0 - relevance[:count]),
            ages_days=ages[:count],
            significance=significance[:count],
            recall_counts=counts[:count],
            episodes=episodes[:count],
            memory_valences=np.zeros(count),
            weights=weights,
        ).score

    fetched: list[int] = []

    def rank_first(count: int) -> RankedPrefix[list[str]]:
        fetched.append(count)
        score = scores(count)
        order = rank_batch(ids[:count], score, limit)
        kth = float(score[order[-1]]) if len(order) >= limit else -np.inf
        return RankedPrefix([ids[i] for i in order], len(order), kth)

    prefix = rank_exactly(
        relevance,
        rank_first,
        limit=limit,
        ceiling=lambda r: score_ceiling(r, weights, mood_valence=0.0),
        first=8,
    )
    whole = [ids[i] for i in rank_batch(ids, scores(n), limit)]
    assert prefix.ranked == whole
    assert fetched[0] == min(n, max(8, limit))
    assert all(later == min(n, 2 * earlier) for earlier, later in pairwise(fetched))
