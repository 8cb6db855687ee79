"""Ranking memory candidates for a turn: candidates become columns, ``rank_columns`` ranks them.

An engine turn ranks ``MemoryCandidate``s through :func:`rank_candidates`; a store's recall
ranks the rows it read through the same :func:`affect_memory.kernel.batch.rank_columns`. Both age
memories from epoch seconds (a store keeps the epoch beside each timestamp), so the same memories
get the same bits on either path, and both agree with the scalar reference
(:func:`affect_memory.kernel.retrieval.rank_candidates_reference`) within 1e-12, exactly for
timestamps in whole seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Final

import numpy as np

from affect_memory.kernel.batch import CandidateColumns, rank_columns
from affect_memory.kernel.bounds import check_limit, parse_zoned, require_zoned_now
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.retrieval import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    SECONDS_PER_DAY,
    RetrievalWeights,
    ScoredCandidate,
)

__all__ = ["candidate_columns", "rank_candidates", "timestamp_epoch"]

_MAX_COUNT: Final = int(np.iinfo(np.int64).max)


@lru_cache(maxsize=16384)
def _epoch_of_text(text: str) -> float:
    """Epoch seconds of a zoned ISO timestamp, memoised: turns see the same memories again."""
    try:
        return parse_zoned(text).timestamp()
    except (ValueError, OverflowError):
        return math.nan


def timestamp_epoch(timestamp: object) -> float:
    """Epoch seconds of a zoned ISO string or datetime, as a store records it; NaN if unusable.

    ``datetime.timestamp`` is the exact microsecond count over 10**6, correctly rounded: the
    float a store computes from the same canonical timestamp.
    """
    if isinstance(timestamp, str):
        return _epoch_of_text(timestamp)
    if isinstance(timestamp, datetime):
        try:
            return parse_zoned(timestamp).timestamp()
        except (ValueError, OverflowError):
            return math.nan
    return math.nan


def candidate_columns(
    candidates: Sequence[MemoryCandidate], *, now: datetime | None = None
) -> CandidateColumns:
    """Validated candidates as the columns ``rank_columns`` ranks (epochs from timestamps).

    When any candidate carries ``age_days``, the columns carry ages: those candidates' own, and
    ``(now - epoch) / 86400`` for the rest (computed as ``rank_columns`` would, so the bits do
    not change), which needs ``now``.
    """
    epochs = np.array([timestamp_epoch(c.timestamp) for c in candidates], dtype=np.float64)
    ages: np.ndarray | None = None
    given = [c.age_days for c in candidates]
    if any(age is not None for age in given):
        if now is None:
            raise InvalidInputError("candidates that carry age_days need now for the others")
        calendar = (require_zoned_now(now).timestamp() - epochs) / SECONDS_PER_DAY
        ages = np.array(
            [calendar[i] if age is None else age for i, age in enumerate(given)],
            dtype=np.float64,
        )
    return CandidateColumns(
        ids=[candidate.id for candidate in candidates],
        distances=np.array([c.distance for c in candidates], dtype=np.float64),
        epochs=epochs,
        significance=np.array([c.significance for c in candidates], dtype=np.float64),
        recall_counts=np.array(
            [min(c.recall_count, _MAX_COUNT) for c in candidates], dtype=np.int64
        ),
        episodes=np.array([c.episode for c in candidates], dtype=np.bool_),
        valences=np.array([c.emotional_valence for c in candidates], dtype=np.float64),
        ages_days=ages,
    )


def rank_candidates(
    candidates: Iterable[MemoryCandidate],
    now: datetime,
    mood_valence: float = 0.0,
    limit: int = 4,
    congruence_on: bool = True,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> tuple[ScoredCandidate, ...]:
    """Score, keep the best of each id (first seen wins a tie), order by score then id, cut.

    Ties in score are broken by ascending id in Unicode code-point order. The candidates are
    turned into columns once and ranked by :func:`affect_memory.kernel.batch.rank_columns`, the path
    a store's recall takes too.
    """
    limit = check_limit(limit)
    require_zoned_now(now)
    pool = tuple(candidates)
    ranked = rank_columns(
        candidate_columns(pool, now=now),
        now,
        mood_valence=mood_valence,
        limit=limit,
        congruence_on=congruence_on,
        weights=weights,
    )
    scores = ranked.scores
    # The candidates were validated and the factors come out finite, so the models are built
    # without validating each one again (the hot path of every turn).
    return tuple(
        ScoredCandidate.model_construct(
            candidate=pool[index],
            score=float(scores.score[index]),
            similarity=float(scores.similarity[index]),
            recency=float(scores.recency[index]),
            salience=float(scores.salience[index]),
            congruence=float(scores.congruence[index]),
            episode_bonus=float(scores.episode_bonus[index]),
        )
        for index in ranked.order
    )
