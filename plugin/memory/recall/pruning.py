"""The exact pruned fetch: read documents and metadata only for the pool members that can
reach the top ``k``.

Chroma's cost grows with the rows whose documents and metadata it returns, and a pool of about
200 needs only a few more than ``k`` of them to decide its top ``k``. Before any row is read,
each member's relevance (its distance) is known, and so, from the index, are its age and
recall count and, for a member the index holds whole, its significance, episode flag and
valence (under the event rule, only for the lexical search's hits:
``affect_memory.memory.recall.members``). So each member's best possible score is the kernel's
own score with what is unknown at its best (``score_ceilings``: an unknown age as fresh; an
unknown count comes as the largest): its exact score (plus a hair) where the index knows it
all. The pool is fetched and ranked in descending order of that ceiling, in growing batches,
until the ``k``-th score fetched beats the ceiling of the first member not yet fetched: no
later member can then enter the top ``k``, and the answer equals ranking the whole pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.batch import score_batch
from affect_memory.kernel.retrieval import RetrievalWeights

__all__ = ["RankedPrefix", "first_fetch", "rank_exactly", "score_ceilings", "settles"]

_SLACK = 1e-9
"""Added to every ceiling: float rounding may put a fetched score a hair above its ceiling."""

Ranked = TypeVar("Ranked")


def first_fetch(limit: int) -> int:
    """How many members the first batch reads: ``k`` and a margin (12 for k = 6)."""
    return limit + max(6, limit // 2)


@dataclass(frozen=True, slots=True)
class RankedPrefix(Generic[Ranked]):
    """The ranking of the pool's members fetched so far."""

    ranked: Ranked
    chosen: int
    """How many members the ranking kept (at most ``k``)."""
    kth_score: float
    """The score of the ``k``-th member kept, or -inf when fewer were kept."""


def score_ceilings(
    distances: npt.NDArray[np.float64],
    ages_days: npt.NDArray[np.float64],
    recall_counts: npt.NDArray[np.int64],
    weights: RetrievalWeights,
    *,
    mood_valence: float,
    congruence_on: bool = True,
    known: npt.NDArray[np.bool_] | None = None,
    significance: npt.NDArray[np.float64] | None = None,
    episodes: npt.NDArray[np.bool_] | None = None,
    valences: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """The best score each member could reach: the kernel's score with its known distance,
    age (NaN, unknown: taken as fresh) and recall count, and its significance, episode flag
    and valence at their best, except for the members ``known`` marks, whose own values
    (``significance``, ``episodes``, ``valences``, aligned with the pool) are scored."""
    n = distances.shape[0]
    factor = weights.congruence_positive if mood_valence > 0 else weights.congruence_negative
    congruent = 1.0 if mood_valence > 0 else -1.0
    valence = congruent if factor >= 1.0 else 0.0
    best_significance = np.ones(n)
    best_episodes = np.ones(n, dtype=bool)
    best_valences = np.full(n, valence)
    if known is not None and known.any():
        assert significance is not None and episodes is not None and valences is not None
        best_significance = np.where(known, significance, best_significance)
        best_episodes = np.where(known, episodes, best_episodes)
        best_valences = np.where(known, valences, best_valences)
    best = score_batch(
        distances,
        ages_days=np.where(np.isnan(ages_days), 0.0, ages_days),
        significance=best_significance,
        recall_counts=recall_counts,
        episodes=best_episodes,
        memory_valences=best_valences,
        mood_valence=mood_valence,
        congruence_on=congruence_on,
        weights=weights,
    )
    ceilings: npt.NDArray[np.float64] = best.score + _SLACK
    return ceilings


def settles(prefix: RankedPrefix[Ranked], next_ceiling: float | None, limit: int) -> bool:
    """Whether ``prefix`` is the pool's top ``limit``: no member is left out (``next_ceiling``
    None), or its ``limit``-th score beats the best the first member left out can reach."""
    return next_ceiling is None or (prefix.chosen >= limit and prefix.kth_score > next_ceiling)


def rank_exactly(
    ceilings: npt.NDArray[np.float64],
    rank_first: Callable[[int], RankedPrefix[Ranked]],
    *,
    limit: int,
    first: int,
) -> RankedPrefix[Ranked]:
    """Rank the pool as a whole would rank, fetching as few members as that allows.

    ``ceilings`` bound the members' scores in fetch order (descending); ``rank_first(n)``
    fetches the first ``n`` members (those it lacks) and ranks them. Batches double from
    ``first`` until the ``limit``-th score beats the ceiling of the first member left out.
    """
    total = int(ceilings.shape[0])
    want = min(total, max(first, limit))
    while True:
        prefix = rank_first(want)
        if settles(prefix, float(ceilings[want]) if want < total else None, limit):
            return prefix
        want = min(total, 2 * want)
