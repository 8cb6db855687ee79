"""Candidate scorers compared in the ranking experiments, each vectorised over a ``QueryBatch``.

A scorer maps a batch to a ``(queries, candidates)`` array, higher-is-better. The kernel
scorers go through the kernel's own formula; the alternatives swap one part of it (the
recency curve) or replace it (similarity only, the additive Park et al. form). Every
recency curve here halves at 30 days: the kernel's linear curve reaches 0.5 at 30 days of
its 60-day horizon, so the exponential and power-law curves are set to match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from affect_memory.experiments.data import QueryBatch
from affect_memory.kernel.batch import score_batch
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights

__all__ = [
    "HALF_LIFE_DAYS",
    "Breakdown",
    "RecencyCurve",
    "Scorer",
    "additive_scores",
    "kernel_breakdown",
    "kernel_scorer",
    "kernel_scores",
    "recency_curve",
    "significance_sweep",
    "similarity_scores",
    "standard_scorers",
]

FloatArray = NDArray[np.float64]
Scorer = Callable[[QueryBatch], FloatArray]
RecencyCurve = Literal["linear", "exponential", "power"]
HALF_LIFE_DAYS = 30.0
"""The common half-life of every non-kernel recency curve (the kernel's own is 30 by default)."""


@dataclass(frozen=True, slots=True)
class Breakdown:
    """The kernel's final score and every factor, each a ``(queries, candidates)`` array."""

    score: FloatArray
    similarity: FloatArray
    recency: FloatArray
    salience: FloatArray
    congruence: FloatArray
    episode_bonus: FloatArray


def kernel_breakdown(
    batch: QueryBatch,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    congruence_on: bool = True,
) -> Breakdown:
    """The kernel's ``score_batch`` over a whole batch, with its factors, one call per mood class.

    ``score_batch`` takes one mood per call. Mood enters the formula only through whether it
    is polarized (``|mood| >= congruence_threshold``) and its sign, so queries are grouped by
    that class and each group is scored in one call with a member's own mood: exact, and at
    most four calls however many queries there are.
    """
    outputs = {name: np.empty(batch.distances.shape) for name in Breakdown.__slots__}
    for rows, mood in _mood_classes(batch.mood_valence, weights):
        scored = score_batch(
            batch.distances[rows].ravel(),
            ages_days=batch.ages_days[rows].ravel(),
            significance=batch.significance[rows].ravel(),
            recall_counts=batch.recall_counts[rows].ravel(),
            episodes=batch.episodes[rows].ravel(),
            memory_valences=batch.memory_valences[rows].ravel(),
            mood_valence=mood,
            congruence_on=congruence_on,
            weights=weights,
        )
        for name, array in outputs.items():
            array[rows] = getattr(scored, name).reshape(len(rows), -1)
    return Breakdown(**outputs)


def _mood_classes(
    moods: FloatArray, weights: RetrievalWeights
) -> list[tuple[NDArray[np.int64], float]]:
    # Unpolarized moods all score alike (no congruence): one class. Polarized ones split by sign.
    polarized = np.abs(moods) >= weights.congruence_threshold
    keys = np.where(polarized, np.sign(moods).astype(np.int64) + 2, 0)
    classes = []
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        classes.append((rows, float(moods[rows[0]])))
    return classes


def _masked(batch: QueryBatch, scores: FloatArray) -> FloatArray:
    return np.where(batch.mask, scores, -np.inf)


def kernel_scores(
    batch: QueryBatch,
    *,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    congruence_on: bool = True,
) -> FloatArray:
    """The kernel's score of every candidate; padding scores -inf."""
    parts = kernel_breakdown(batch, weights=weights, congruence_on=congruence_on)
    return _masked(batch, parts.score)


def recency_curve(
    ages_days: FloatArray, curve: RecencyCurve, half_life_days: float = HALF_LIFE_DAYS
) -> FloatArray:
    """Exponential ``0.5**(age/h)`` or power-law ``(1 + age/h)**-1``: both 0.5 at ``h`` days."""
    age = np.maximum(np.asarray(ages_days, dtype=np.float64), 0.0)
    if curve == "exponential":
        return np.asarray(0.5 ** (age / half_life_days))
    if curve == "power":
        return np.asarray(1.0 / (1.0 + age / half_life_days))
    raise InvalidInputError(f"curve must be 'exponential' or 'power', got {curve!r}")


def kernel_scorer(
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    *,
    congruence_on: bool = True,
    recency: RecencyCurve = "linear",
) -> Scorer:
    """The kernel formula as a scorer, optionally with its linear recency curve swapped out."""

    def score(batch: QueryBatch) -> FloatArray:
        parts = kernel_breakdown(batch, weights=weights, congruence_on=congruence_on)
        if recency == "linear":
            return _masked(batch, parts.score)
        fresh = recency_curve(batch.ages_days, recency)
        swapped = (parts.similarity * fresh * parts.salience + parts.episode_bonus)
        return _masked(batch, swapped * parts.congruence)

    return score


def similarity_scores(batch: QueryBatch) -> FloatArray:
    """Cosine similarity alone, ``1 - distance/2``: plain vector-store order."""
    return _masked(batch, 1.0 - batch.distances / 2.0)


def _min_max(values: FloatArray, mask: NDArray[np.bool_]) -> FloatArray:
    low = np.min(np.where(mask, values, np.inf), axis=1, keepdims=True)
    high = np.max(np.where(mask, values, -np.inf), axis=1, keepdims=True)
    span = high - low
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, (values - low) / safe, 0.0)


def additive_scores(
    batch: QueryBatch,
    *,
    relevance_weight: float = 1.0,
    recency_weight: float = 1.0,
    importance_weight: float = 1.0,
) -> FloatArray:
    """Park et al. (2023) form: a weighted sum of min-max normalised relevance, recency, importance.

    Recency is exponential at the common 30-day half-life and importance is significance;
    each term is normalised to [0, 1] within the query's candidates, as in Generative Agents.
    """
    similarity = _min_max(1.0 - batch.distances / 2.0, batch.mask)
    fresh = _min_max(recency_curve(batch.ages_days, "exponential"), batch.mask)
    significant = _min_max(batch.significance, batch.mask)  # importance, in Park et al.'s words
    total = relevance_weight * similarity + recency_weight * fresh + importance_weight * significant
    return _masked(batch, total)


def significance_sweep(
    values: Sequence[float], base: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS
) -> dict[str, Scorer]:
    """One kernel scorer per significance weight, named ``significance_weight=<value>``."""
    return {
        f"significance_weight={value:g}": kernel_scorer(
            RetrievalWeights(**{**base.model_dump(), "significance_weight": float(value)})
        )
        for value in values
    }


def standard_scorers() -> dict[str, Scorer]:
    """The scorers of notebook 01, in table order."""
    return {
        "similarity only": similarity_scores,
        "kernel default": kernel_scorer(),
        "kernel without salience": kernel_scorer(
            RetrievalWeights(significance_weight=0.0, recall_weight=0.0)
        ),
        "kernel without congruence": kernel_scorer(congruence_on=False),
        "additive (Park-style)": additive_scores,
        "kernel, exponential recency": kernel_scorer(recency="exponential"),
        "kernel, power-law recency": kernel_scorer(recency="power"),
    }
