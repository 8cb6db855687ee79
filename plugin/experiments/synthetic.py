"""Seeded synthetic ranking benchmarks: five feature regimes, and labels drawn from known weights.

Regime queries draw the relevant candidate *first* (uniformly among the candidates), then
every feature; a feature depends on relevance only in the regimes where it is meant to
carry information, so anything a scorer gains elsewhere is luck, not signal.

======  =====================  =========================================================
Regime  Name                   What differs between the relevant and other candidates
======  =====================  =========================================================
A       uncorrelated           only similarity (the distributions overlap)
B       salience informs       significance and recall count are higher for the relevant
C       recency informs        the relevant memory is recent; others are of any age
D       both inform            B and C together
E       mood informs           the relevant memory's valence shares the mood's sign 75%
                               of the time (50% for the others); the mood is polarized
======  =====================  =========================================================

The numbers in ``SyntheticConfig`` are arbitrary bounded choices, picked so similarity
alone ranks the relevant memory first about a quarter of the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from affect_memory.experiments.data import QueryBatch
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import RetrievalWeights

__all__ = [
    "DEFAULT_SYNTHETIC_CONFIG",
    "REGIMES",
    "REGIME_NAMES",
    "Regime",
    "SyntheticConfig",
    "generate_from_weights",
    "generate_regime",
]

Regime = Literal["A", "B", "C", "D", "E"]
REGIMES: tuple[Regime, ...] = ("A", "B", "C", "D", "E")
REGIME_NAMES: dict[Regime, str] = {
    "A": "uncorrelated",
    "B": "salience informs",
    "C": "recency informs",
    "D": "both inform",
    "E": "mood informs",
}
_SALIENCE: frozenset[str] = frozenset({"B", "D"})
_RECENCY: frozenset[str] = frozenset({"C", "D"})


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    """The distributions behind every synthetic candidate."""

    n_candidates: int = 20
    similarity_mean: float = 0.55
    """Mean similarity (1 - distance/2) of an irrelevant candidate."""
    similarity_sd: float = 0.08
    relevant_lift: float = 0.10
    """How much higher the relevant candidate's mean similarity is; < 2 sd, so they overlap."""
    max_age_days: float = 180.0
    """Uninformative ages are uniform on [0, max_age_days]."""
    fresh_age_mean_days: float = 10.0
    """Where recency informs, the relevant memory's age is exponential with this mean."""
    episode_rate: float = 0.15
    recall_mean: float = 1.5
    """Uninformative recall counts are Poisson with this mean."""
    mood_match_rate: float = 0.75
    min_mood: float = 0.3
    """Where mood informs, |mood| is uniform on [min_mood, 1], above the congruence threshold."""

    def __post_init__(self) -> None:
        """Refuse configurations that cannot generate a benchmark."""
        if self.n_candidates < 2:
            raise InvalidInputError("SyntheticConfig.n_candidates must be >= 2")
        if not (self.similarity_sd > 0 and 0 <= self.similarity_mean <= 1):
            raise InvalidInputError("SyntheticConfig.similarity_* out of range")
        if not 0 <= self.mood_match_rate <= 1 or not 0 <= self.episode_rate <= 1:
            raise InvalidInputError("SyntheticConfig rates must be within [0, 1]")


DEFAULT_SYNTHETIC_CONFIG = SyntheticConfig()


def _check_size(n_queries: int) -> None:
    if isinstance(n_queries, bool) or not isinstance(n_queries, int) or n_queries < 1:
        raise InvalidInputError(f"n_queries must be an integer >= 1, got {n_queries!r}")


def _distances(similarity: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(2.0 * (1.0 - np.clip(similarity, 0.0, 1.0)))


def generate_regime(
    regime: Regime,
    n_queries: int,
    *,
    seed: int,
    config: SyntheticConfig = DEFAULT_SYNTHETIC_CONFIG,
) -> QueryBatch:
    """``n_queries`` queries of one regime; the same seed and regime give the same batch."""
    if regime not in REGIMES:
        raise InvalidInputError(f"regime must be one of {REGIMES}, got {regime!r}")
    _check_size(n_queries)
    # One stream per (seed, regime): regimes do not share draws, so adding one changes no other.
    rng = np.random.default_rng([seed, REGIMES.index(regime)])
    shape = (n_queries, config.n_candidates)
    relevant = rng.integers(0, config.n_candidates, size=n_queries)
    is_relevant = np.zeros(shape, dtype=np.bool_)
    is_relevant[np.arange(n_queries), relevant] = True

    similarity = rng.normal(config.similarity_mean, config.similarity_sd, shape)
    similarity += config.relevant_lift * is_relevant

    ages = rng.uniform(0.0, config.max_age_days, shape)
    if regime in _RECENCY:
        fresh = rng.exponential(config.fresh_age_mean_days, n_queries)
        ages[np.arange(n_queries), relevant] = np.minimum(fresh, config.max_age_days)

    if regime in _SALIENCE:
        significance = np.where(
            is_relevant, rng.beta(4.0, 1.5, shape), rng.beta(1.5, 4.0, shape)
        )
        recalls = rng.poisson(np.where(is_relevant, 3.0 * config.recall_mean, config.recall_mean))
    else:
        significance = rng.uniform(0.0, 1.0, shape)
        recalls = rng.poisson(config.recall_mean, shape)

    episodes = rng.random(shape) < config.episode_rate
    magnitude = rng.uniform(0.1, 1.0, shape)
    if regime == "E":
        mood = rng.choice([-1.0, 1.0], n_queries) * rng.uniform(config.min_mood, 1.0, n_queries)
        match_rate = np.where(is_relevant, config.mood_match_rate, 0.5)
        same_sign = rng.random(shape) < match_rate
        valences = np.where(same_sign, 1.0, -1.0) * np.sign(mood)[:, None] * magnitude
    else:
        mood = rng.uniform(-1.0, 1.0, n_queries)
        valences = rng.choice([-1.0, 1.0], shape) * magnitude

    return QueryBatch(
        distances=_distances(similarity),
        ages_days=ages,
        significance=significance,
        recall_counts=recalls.astype(np.int64),
        episodes=episodes,
        memory_valences=valences,
        mood_valence=mood,
        relevant=relevant.astype(np.int64),
        mask=np.ones(shape, dtype=np.bool_),
    )


def generate_from_weights(
    weights: RetrievalWeights,
    n_queries: int,
    *,
    seed: int,
    temperature: float = 0.02,
    n_candidates: int = 20,
    max_age_days: float = 120.0,
) -> QueryBatch:
    """Queries whose relevant candidate is chosen by the kernel score under ``weights``.

    Features are drawn independently; the label is the argmax of score / temperature plus
    Gumbel noise, i.e. a softmax choice, so a weight-fitter should recover ``weights``.
    """
    # Imported here: scorers imports this module's types, and generating labels needs a scorer.
    from affect_memory.experiments.scorers import kernel_scores

    _check_size(n_queries)
    if not temperature > 0:
        raise InvalidInputError(f"temperature must be > 0, got {temperature!r}")
    rng = np.random.default_rng([seed, 99])
    shape = (n_queries, n_candidates)
    unlabelled = QueryBatch(
        distances=_distances(rng.normal(0.55, 0.08, shape)),
        ages_days=rng.uniform(0.0, max_age_days, shape),
        significance=rng.uniform(0.0, 1.0, shape),
        recall_counts=rng.poisson(1.5, shape).astype(np.int64),
        episodes=rng.random(shape) < 0.2,
        memory_valences=rng.uniform(-1.0, 1.0, shape),
        mood_valence=np.zeros(n_queries),
        relevant=np.zeros(n_queries, dtype=np.int64),
        mask=np.ones(shape, dtype=np.bool_),
    )
    true_scores = kernel_scores(unlabelled, weights=weights)
    noisy = true_scores / temperature + rng.gumbel(0.0, 1.0, shape)
    relevant = np.argmax(noisy, axis=1).astype(np.int64)
    return QueryBatch(
        distances=unlabelled.distances,
        ages_days=unlabelled.ages_days,
        significance=unlabelled.significance,
        recall_counts=unlabelled.recall_counts,
        episodes=unlabelled.episodes,
        memory_valences=unlabelled.memory_valences,
        mood_valence=unlabelled.mood_valence,
        relevant=relevant,
        mask=unlabelled.mask,
    )
