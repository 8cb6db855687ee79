"""Ranking metrics: the rank of a query's first relevant candidate, recall@k and MRR.

Scores are higher-is-better. A query's rank is that of its best-ranked relevant candidate
(several may be relevant: a question with several evidence memories). Ties are pessimistic:
a candidate whose score equals the relevant candidate's is counted as ranked above it, so a
scorer cannot gain from ties (a constant scorer ranks the relevant memory last, not first).
Masked (padding) candidates never count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from affect_memory.experiments.data import QueryBatch
from affect_memory.kernel.errors import InvalidInputError

__all__ = [
    "RankingMetrics",
    "evaluate",
    "evaluate_scorers",
    "mean_reciprocal_rank",
    "ranks",
    "recall_at_k",
]


@dataclass(frozen=True, slots=True)
class RankingMetrics:
    """Recall@1, recall@5 and mean reciprocal rank over a set of queries."""

    recall_at_1: float
    recall_at_5: float
    mrr: float
    n_queries: int
    mrr_se: float = 0.0
    """Standard error of the MRR: the spread of 1/rank over queries, over sqrt(queries)."""


def ranks(
    scores: NDArray[np.float64],
    relevant: NDArray[np.int64],
    mask: NDArray[np.bool_] | None = None,
    targets: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """1-based rank of each query's first relevant candidate; ties count against it.

    ``targets`` marks every relevant candidate (default: only ``relevant``); the rank is then
    that of the best-scored one, counting only the irrelevant candidates above it.
    """
    scores = np.asarray(scores, dtype=np.float64)
    relevant = np.asarray(relevant, dtype=np.int64)
    if scores.ndim != 2:
        raise InvalidInputError(f"scores must be (queries, candidates), got shape {scores.shape}")
    if relevant.shape != (scores.shape[0],):
        raise InvalidInputError(f"relevant must have shape ({scores.shape[0]},)")
    if np.any((relevant < 0) | (relevant >= scores.shape[1])):
        raise InvalidInputError("relevant must index a candidate column")
    if mask is None:
        mask = np.ones(scores.shape, dtype=np.bool_)
    elif mask.shape != scores.shape:
        raise InvalidInputError(f"mask must have shape {scores.shape}")
    if not np.all(np.isfinite(scores[mask])):
        raise InvalidInputError("scores must be finite where the mask is set")
    if targets is None:
        return _ranks(scores, relevant, mask)
    if targets.shape != scores.shape:
        raise InvalidInputError(f"targets must have shape {scores.shape}")
    best = np.max(np.where(targets & mask, scores, -np.inf), axis=1, keepdims=True)
    above = (scores >= best) & mask & ~targets
    return np.asarray(1 + above.sum(axis=1), dtype=np.int64)


def _ranks(
    scores: NDArray[np.float64], relevant: NDArray[np.int64], mask: NDArray[np.bool_]
) -> NDArray[np.int64]:
    rows = np.arange(scores.shape[0])
    target = scores[rows, relevant][:, None]
    above = (scores >= target) & mask
    above[rows, relevant] = False
    return np.asarray(1 + above.sum(axis=1), dtype=np.int64)


def recall_at_k(rank: NDArray[np.int64], k: int) -> float:
    """Share of queries whose relevant candidate is in the top ``k``."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be an integer >= 1, got {k!r}")
    return float(np.mean(np.asarray(rank) <= k))


def mean_reciprocal_rank(rank: NDArray[np.int64]) -> float:
    """Mean of 1/rank."""
    rank = np.asarray(rank)
    if rank.size == 0 or np.any(rank < 1):
        raise InvalidInputError("ranks must be a non-empty array of integers >= 1")
    return float(np.mean(1.0 / rank))


def evaluate(scores: NDArray[np.float64], batch: QueryBatch) -> RankingMetrics:
    """Recall@1, recall@5 and MRR of ``scores`` against the batch's labels."""
    rank = ranks(scores, batch.relevant, batch.mask, batch.targets)
    return RankingMetrics(
        recall_at_1=recall_at_k(rank, 1),
        recall_at_5=recall_at_k(rank, 5),
        mrr=mean_reciprocal_rank(rank),
        n_queries=int(rank.size),
        mrr_se=float(np.std(1.0 / rank, ddof=1) / np.sqrt(rank.size)) if rank.size > 1 else 0.0,
    )


def evaluate_scorers(
    scorers: Mapping[str, Callable[[QueryBatch], NDArray[np.float64]]],
    batches: Mapping[str, QueryBatch],
) -> dict[str, dict[str, RankingMetrics]]:
    """Every scorer on every batch: ``result[scorer][batch]``, both in the mappings' order."""
    return {
        name: {label: evaluate(scorer(batch), batch) for label, batch in batches.items()}
        for name, scorer in scorers.items()
    }
