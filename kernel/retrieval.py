"""Pure memory scoring, one candidate at a time: the reference every faster path agrees with.

Scores are higher-is-better. Distances are cosine distances, ``1 - cos``, in [0, 2]. The
columnar scorer (``affect_memory.kernel.batch``) and the one ranking path of turns and recalls
(``affect_memory.kernel.ranking``) build on the weights, the result type and the helpers defined
here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from affect_memory.kernel.bounds import (
    FiniteFloat,
    NonNegativeFloat,
    UnitInterval,
    check_int,
    check_limit,
    check_number,
    parse_zoned,
    require_zoned_now,
)
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.models import FrozenModel, MemoryCandidate
from affect_memory.kernel.parameters import ParameterModel

__all__ = [
    "DEFAULT_RETRIEVAL_WEIGHTS",
    "SECONDS_PER_DAY",
    "RetrievalWeights",
    "ScoredCandidate",
    "age_days",
    "candidate_score",
    "mood_congruence_factor",
    "rank_candidates_reference",
    "recency_weight",
    "score_candidate",
]

SECONDS_PER_DAY = 86400.0
"""Seconds in a day: ages in days are seconds over this, on every path."""


def _positive(value: float) -> float:
    if not value > 0:
        raise ValueError(f"must be > 0, got {shown(value)}")
    return value


PositiveFloat = Annotated[float, BeforeValidator(check_number), AfterValidator(_positive)]
PositiveUnit = Annotated[UnitInterval, AfterValidator(_positive)]
"""A float in (0, 1]: a recency that never zeroes a score."""


class RetrievalWeights(ParameterModel):
    """The constants of the memory scorer; see docs/kernel/constants.md.

    The gains (significance, recall, episode) are not capped at 1 (fitting explores the
    significance weight up to 2).
    """

    recency_horizon_days: PositiveFloat = 60.0
    recency_floor: PositiveUnit = 0.40
    recency_fallback: PositiveUnit = 0.70
    """Recency of a memory whose timestamp is missing or unusable."""
    significance_weight: NonNegativeFloat = 0.03
    recall_weight: NonNegativeFloat = 0.006
    recall_cap: NonNegativeFloat = 0.025
    episode_bonus: NonNegativeFloat = 0.05
    congruence_threshold: UnitInterval = 0.20
    """The |mood valence| from which congruence applies."""
    congruence_negative: NonNegativeFloat = 1.06
    congruence_positive: NonNegativeFloat = 1.03


DEFAULT_RETRIEVAL_WEIGHTS = RetrievalWeights()


class ScoredCandidate(FrozenModel):
    """A candidate with its final score and every factor that went into it."""

    candidate: MemoryCandidate
    score: FiniteFloat
    similarity: FiniteFloat
    recency: FiniteFloat
    salience: FiniteFloat
    congruence: FiniteFloat
    episode_bonus: FiniteFloat


def _recency_from_days(days_ago: float, weights: RetrievalWeights) -> float:
    age = max(0.0, days_ago)
    return min(1.0, max(weights.recency_floor, 1.0 - age / weights.recency_horizon_days))


def age_days(timestamp: object, now: datetime) -> float | None:
    """Days from ``timestamp`` (zoned ISO text or datetime) to ``now``; None when unusable.

    Exact ``timedelta`` arithmetic, the scalar reference's; negative for a future timestamp.
    """
    if not isinstance(timestamp, str | datetime):
        return None
    try:
        moment = parse_zoned(timestamp)
        return (now - moment).total_seconds() / SECONDS_PER_DAY
    except (ValueError, OverflowError):
        return None


def recency_weight(
    timestamp: str | datetime | None,
    now: datetime,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> float:
    """Linear freshness from 1 down to a floor over the horizon; future is fresh.

    Missing, unparsable or naive timestamps get the fallback (0.70 by default).
    """
    require_zoned_now(now)
    age = age_days(timestamp, now)
    if age is None:
        return weights.recency_fallback
    return _recency_from_days(age, weights)


def _salience(significance: float, recall_count: int, weights: RetrievalWeights) -> float:
    clamped = min(1.0, max(0.0, significance))
    recall = min(weights.recall_cap, weights.recall_weight * math.log1p(recall_count))
    return 1.0 + weights.significance_weight * clamped + recall


def candidate_score(
    distance: float,
    days_ago: float,
    episode: bool,
    significance: float,
    recall_count: int,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> float:
    """similarity × recency × salience, plus the episode bonus; age is given in days."""
    try:
        distance = check_number(distance, 0.0, 2.0)
        days_ago = check_number(days_ago)
        significance = check_number(significance)
        recall_count = check_int(recall_count, 0)
    except ValueError as error:
        raise InvalidInputError(f"candidate_score argument {error}") from None
    if not isinstance(episode, bool):
        raise InvalidInputError(f"episode must be a bool, got {episode!r}")
    similarity = 1.0 - distance / 2.0
    recency = _recency_from_days(days_ago, weights)
    bonus = weights.episode_bonus if episode else 0.0
    return similarity * recency * _salience(significance, recall_count, weights) + bonus


def mood_congruence_factor(
    memory_valence: float,
    mood_valence: float,
    congruence_on: bool = True,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> float:
    """A small boost for a memory whose valence shares the mood's sign, when ``congruence_on``.

    It trusts its flag, as the reference does: the 0.20 threshold is applied by
    :func:`score_candidate`, which switches congruence on only for a clearly polarized mood.
    """
    if not congruence_on:
        return 1.0
    if memory_valence == 0 or (memory_valence > 0) != (mood_valence > 0):
        return 1.0
    return weights.congruence_negative if mood_valence < 0 else weights.congruence_positive


def score_candidate(
    candidate: MemoryCandidate,
    now: datetime,
    mood_valence: float = 0.0,
    congruence_on: bool = True,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> ScoredCandidate:
    """Score one candidate at ``now`` under a mood valence, keeping the breakdown.

    A candidate carrying ``age_days`` (a retriever's time rule decided it) is aged by that.
    """
    if candidate.age_days is None:
        recency = recency_weight(candidate.timestamp, now, weights=weights)
    else:
        require_zoned_now(now)
        recency = _recency_from_days(candidate.age_days, weights)
    similarity = 1.0 - candidate.distance / 2.0
    salience = _salience(candidate.significance, candidate.recall_count, weights)
    bonus = weights.episode_bonus if candidate.episode else 0.0
    clear_mood = abs(mood_valence) >= weights.congruence_threshold
    congruence = mood_congruence_factor(
        candidate.emotional_valence, mood_valence, congruence_on and clear_mood, weights=weights
    )
    score = (similarity * recency * salience + bonus) * congruence
    return ScoredCandidate(
        candidate=candidate,
        score=score,
        similarity=similarity,
        recency=recency,
        salience=salience,
        congruence=congruence,
        episode_bonus=bonus,
    )


def rank_candidates_reference(
    candidates: Iterable[MemoryCandidate],
    now: datetime,
    mood_valence: float = 0.0,
    limit: int = 4,
    congruence_on: bool = True,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> tuple[ScoredCandidate, ...]:
    """The scalar reference ranking: one ``score_candidate`` per candidate, ages exact.

    Best of each id (first seen wins a tie), by score then id in code-point order, cut to
    ``limit``. ``affect_memory.kernel.ranking.rank_candidates`` is the fast path every turn takes;
    it ages from epoch seconds, so it agrees with this within 1e-12 (exactly for whole seconds).
    """
    limit = check_limit(limit)
    require_zoned_now(now)
    best: dict[str, ScoredCandidate] = {}
    for candidate in candidates:
        scored = score_candidate(candidate, now, mood_valence, congruence_on, weights=weights)
        kept = best.get(candidate.id)
        if kept is None or scored.score > kept.score:
            best[candidate.id] = scored
    ordered = sorted(best.values(), key=lambda item: (-item.score, item.candidate.id))
    return tuple(ordered[:limit])
