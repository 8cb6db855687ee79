"""Retrieval metrics, higher is better: the one implementation the benchmarks, the experiments
and the tests share.

Two inputs, one meaning of a rank (1-based, of a query's first relevant item):

* a ranking as ids, best first (what ``recall`` and the benchmarks' systems return):
  ``first_rank``, ``reciprocal_rank`` (MRR's term: one over that rank, 0 when no relevant id
  is within the cutoff), ``share_at_k`` (R@k: the share of the relevant ids in the top k) and
  ``hit_at_k`` (whether any is);
* scores of many queries' candidates (what the experiments' scorers give): ``ranks``, where
  ties count against the relevant candidate so a scorer cannot gain from them (a constant
  scorer ranks the relevant memory last, not first) and masked (padding) candidates never
  count; then ``recall_at_k`` (the share of queries ranked at most k), ``mean_reciprocal_rank``
  and ``evaluate``, which puts the three together as ``RankingMetrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from affect_memory.kernel.errors import InvalidInputError

__all__ = [
    "LabelledBatch",
    "RankingMetrics",
    "evaluate",
    "evaluate_scorers",
    "first_rank",
    "hit_at_k",
    "mean_reciprocal_rank",
    "ranks",
    "recall_at_k",
    "reciprocal_rank",
    "share_at_k",
]


def _check_k(k: object, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"{name} must be an integer >= 1, got {k!r}")
    return k


# ---------------------------------------------------------------- a ranking of ids


def first_rank(
    ranked: Sequence[str], relevant: Collection[str], *, cutoff: int | None = None
) -> int | None:
    """The 1-based rank of the first of ``relevant`` in ``ranked`` (best first), or None when
    none is within the first ``cutoff`` (None: anywhere)."""
    head = ranked if cutoff is None else ranked[: _check_k(cutoff, "cutoff")]
    return next((rank for rank, ident in enumerate(head, 1) if ident in relevant), None)


def reciprocal_rank(
    ranked: Sequence[str], relevant: Collection[str], *, cutoff: int | None = None
) -> float:
    """One over ``first_rank`` (MRR@cutoff's term for one query), 0 when there is none."""
    rank = first_rank(ranked, relevant, cutoff=cutoff)
    return 0.0 if rank is None else 1.0 / rank


def share_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """R@k: the share of the (distinct) ``relevant`` ids among the first ``k`` of ``ranked``."""
    wanted = set(relevant)
    if not wanted:
        raise InvalidInputError("relevant must name at least one id")
    return len(wanted.intersection(ranked[: _check_k(k)])) / len(wanted)


def hit_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when any of ``relevant`` is among the first ``k`` of ``ranked``, else 0.0."""
    return float(any(ident in relevant for ident in ranked[: _check_k(k)]))


# ---------------------------------------------------------------- scores of many queries


@dataclass(frozen=True, slots=True)
class RankingMetrics:
    """Recall@1, recall@5 and mean reciprocal rank over a set of queries."""

    recall_at_1: float
    recall_at_5: float
    mrr: float
    n_queries: int
    mrr_se: float = 0.0
    """Standard error of the MRR: the spread of 1/rank over queries, over sqrt(queries)."""


class LabelledBatch(Protocol):
    """Which candidate of each query is relevant (``affect_memory.experiments.QueryBatch``)."""

    @property
    def relevant(self) -> NDArray[np.int64]:
        """Each query's relevant candidate column."""
        ...

    @property
    def mask(self) -> NDArray[np.bool_]:
        """Which candidates are real (False: padding)."""
        ...

    @property
    def targets(self) -> NDArray[np.bool_] | None:
        """Every relevant candidate of each query (None: only ``relevant``)."""
        ...


Batch = TypeVar("Batch", bound=LabelledBatch)


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
    return float(np.mean(np.asarray(rank) <= _check_k(k)))


def mean_reciprocal_rank(rank: NDArray[np.int64]) -> float:
    """Mean of 1/rank."""
    rank = np.asarray(rank)
    if rank.size == 0 or np.any(rank < 1):
        raise InvalidInputError("ranks must be a non-empty array of integers >= 1")
    return float(np.mean(1.0 / rank))


def evaluate(scores: NDArray[np.float64], batch: LabelledBatch) -> RankingMetrics:
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
    scorers: Mapping[str, Callable[[Batch], NDArray[np.float64]]],
    batches: Mapping[str, Batch],
) -> dict[str, dict[str, RankingMetrics]]:
    """Every scorer on every batch: ``result[scorer][batch]``, both in the mappings' order."""
    return {
        name: {label: evaluate(scorer(batch), batch) for label, batch in batches.items()}
        for name, scorer in scorers.items()
    }
