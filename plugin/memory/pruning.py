"""The exact pruned fetch: read documents and metadata only for the pool members that can
reach the top ``k``.

Chroma's cost grows with the rows whose documents and metadata it returns, and a pool of
about 200 needs only the few dozen most relevant to decide its top 6. A member's score is at
most its relevance (the kernel's similarity) times the largest salience, plus the episode
bonus, times the largest congruence factor, since recency never exceeds 1. So the pool is
fetched and ranked most relevant first, in growing batches, until the ``k``-th score fetched
beats that ceiling for the most relevant member not yet fetched: no later member can then
enter the top ``k``, and the answer equals ranking the whole pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from kernel.retrieval import RetrievalWeights

__all__ = ["FIRST_FETCH", "RankedPrefix", "rank_exactly", "score_ceiling"]

FIRST_FETCH = 48
"""Pool members fetched first (at least ``k``): enough for most LoCoMo questions at k = 10."""

_SLACK = 1e-9
"""Added to the ceiling: similarity is ``1 - distance / 2`` in floats, a hair above relevance."""

Ranked = TypeVar("Ranked")


@dataclass(frozen=True, slots=True)
class RankedPrefix(Generic[Ranked]):
    """The ranking of the pool's most relevant members fetched so far."""

    ranked: Ranked
    chosen: int
    """How many members the ranking kept (at most ``k``)."""
    kth_score: float
    """The score of the ``k``-th member kept, or -inf when fewer were kept."""


def score_ceiling(
    relevance: float,
    weights: RetrievalWeights,
    *,
    mood_valence: float,
    congruence_on: bool = True,
) -> float:
    """The best score a member with this relevance (the kernel's similarity) could reach."""
    salience = 1.0 + weights.significance_weight + weights.recall_cap
    congruence = 1.0
    if congruence_on and abs(mood_valence) >= weights.congruence_threshold:
        factor = weights.congruence_negative if mood_valence < 0 else weights.congruence_positive
        congruence = max(1.0, factor)
    return (relevance * salience + weights.episode_bonus) * congruence + _SLACK


def rank_exactly(
    relevance: npt.NDArray[np.float64],
    rank_first: Callable[[int], RankedPrefix[Ranked]],
    *,
    limit: int,
    ceiling: Callable[[float], float],
    first: int = FIRST_FETCH,
) -> RankedPrefix[Ranked]:
    """Rank the pool as a whole would rank, fetching as few members as that allows.

    ``relevance`` is the pool's, most relevant first; ``rank_first(n)`` fetches the first ``n``
    members (those it lacks) and ranks them; ``ceiling(r)`` bounds the score of a member of
    relevance ``r``. Batches double until the ``limit``-th score beats the ceiling of the
    first member left out.
    """
    total = int(relevance.shape[0])
    want = min(total, max(first, limit))
    while True:
        prefix = rank_first(want)
        if want >= total:
            return prefix
        if prefix.chosen >= limit and prefix.kth_score > ceiling(float(relevance[want])):
            return prefix
        want = min(total, 2 * want)
