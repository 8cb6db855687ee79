"""Experiment scorers: the batch kernel scorer equals the scalar kernel, and the alternatives."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from affect_memory.experiments.data import LabelledQuery, QueryBatch
from affect_memory.experiments.scorers import (
    additive_scores,
    kernel_breakdown,
    kernel_scorer,
    kernel_scores,
    recency_curve,
    significance_sweep,
    similarity_scores,
    standard_scorers,
)
from affect_memory.experiments.synthetic import generate_regime
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.retrieval import (
    RetrievalWeights,
    candidate_score,
    mood_congruence_factor,
    score_candidate,
)

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _random_batch(rng: np.random.Generator, queries: int = 30, size: int = 12) -> QueryBatch:
    shape = (queries, size)
    moods = rng.uniform(-1, 1, queries)
    moods[:3] = [0.0, 0.2, -0.2]  # exactly at zero and at the congruence threshold
    valences = rng.uniform(-1, 1, shape)
    valences[:, 0] = 0.0
    return QueryBatch(
        distances=rng.uniform(0, 2, shape),
        ages_days=rng.uniform(-5, 200, shape),
        significance=rng.uniform(0, 1, shape),
        recall_counts=rng.integers(0, 50, shape),
        episodes=rng.random(shape) < 0.3,
        memory_valences=valences,
        mood_valence=moods,
        relevant=np.zeros(queries, dtype=np.int64),
        mask=np.ones(shape, dtype=bool),
    )


def _random_weights(rng: np.random.Generator) -> RetrievalWeights:
    return RetrievalWeights(
        recency_horizon_days=float(rng.uniform(5, 300)),
        recency_floor=float(rng.uniform(0.05, 1)),
        significance_weight=float(rng.uniform(0, 2)),
        recall_weight=float(rng.uniform(0, 0.02)),
        episode_bonus=float(rng.uniform(0, 0.2)),
        congruence_threshold=float(rng.uniform(0, 0.5)),
    )


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("congruence_on", [True, False])
def test_batch_scores_equal_the_scalar_kernel(seed: int, congruence_on: bool) -> None:
    rng = np.random.default_rng(seed)
    batch = _random_batch(rng)
    weights = RetrievalWeights() if seed == 0 else _random_weights(rng)
    scores = kernel_scores(batch, weights=weights, congruence_on=congruence_on)
    for row in range(batch.n_queries):
        for col in range(batch.n_candidates):
            expected = candidate_score(
                float(batch.distances[row, col]),
                float(batch.ages_days[row, col]),
                bool(batch.episodes[row, col]),
                float(batch.significance[row, col]),
                int(batch.recall_counts[row, col]),
                weights=weights,
            ) * mood_congruence_factor(
                float(batch.memory_valences[row, col]),
                float(batch.mood_valence[row]),
                # the factor trusts its flag; score_candidate applies the threshold
                congruence_on
                and abs(float(batch.mood_valence[row])) >= weights.congruence_threshold,
                weights=weights,
            )
            assert scores[row, col] == expected


def test_batch_breakdown_matches_score_candidate_with_timestamps() -> None:
    rng = np.random.default_rng(42)
    batch = _random_batch(rng, queries=10, size=8)
    parts = kernel_breakdown(batch)
    for row in range(batch.n_queries):
        for col in range(batch.n_candidates):
            candidate = MemoryCandidate(
                id=f"m{col}",
                text="",
                distance=float(batch.distances[row, col]),
                timestamp=(NOW - timedelta(days=float(batch.ages_days[row, col]))).isoformat(),
                significance=float(batch.significance[row, col]),
                recall_count=int(batch.recall_counts[row, col]),
                episode=bool(batch.episodes[row, col]),
                emotional_valence=float(batch.memory_valences[row, col]),
            )
            scored = score_candidate(candidate, NOW, float(batch.mood_valence[row]))
            assert parts.score[row, col] == pytest.approx(scored.score, rel=1e-9)
            assert parts.recency[row, col] == pytest.approx(scored.recency, rel=1e-9)
            assert parts.salience[row, col] == scored.salience
            assert parts.congruence[row, col] == scored.congruence
            assert parts.episode_bonus[row, col] == scored.episode_bonus


def test_padding_scores_minus_infinity_for_every_scorer() -> None:
    short = LabelledQuery(distances=[0.5], ages_days=[1.0], significance=[0.5],
                          recall_counts=[0], episodes=[False], memory_valences=[0.0], relevant=0)
    long = generate_regime("A", 1, seed=0).to_queries()[0]
    batch = QueryBatch.from_queries([short, long])
    for name, scorer in standard_scorers().items():
        scores = scorer(batch)
        assert np.all(np.isneginf(scores[0, 1:])), name
        assert np.all(np.isfinite(scores[1])), name


def test_every_recency_curve_halves_at_thirty_days() -> None:
    ages = np.array([0.0, 30.0, -3.0])
    for curve in ("exponential", "power"):
        assert recency_curve(ages, curve).tolist() == pytest.approx([1.0, 0.5, 1.0])  # type: ignore[arg-type]
    batch = generate_regime("A", 1, seed=0)
    linear = kernel_breakdown(batch.take([0]))
    thirty = np.abs(batch.ages_days[0] - 30.0).argmin()
    assert linear.recency[0, thirty] == pytest.approx(1 - batch.ages_days[0, thirty] / 60)


def test_similarity_only_is_plain_vector_store_order() -> None:
    batch = generate_regime("A", 3, seed=1)
    np.testing.assert_array_equal(similarity_scores(batch), 1 - batch.distances / 2)


def test_additive_form_is_the_sum_of_min_max_normalised_terms() -> None:
    query = LabelledQuery(distances=[0.0, 1.0, 2.0], ages_days=[0.0, 30.0, 60.0],
                          significance=[0.0, 1.0, 0.5], recall_counts=[0, 0, 0],
                          episodes=[False, False, False], memory_valences=[0.0, 0.0, 0.0],
                          relevant=0)
    scores = additive_scores(QueryBatch.from_queries([query]))
    # similarity 1, .5, 0; recency 1, .5, .25 -> 1, 1/3, 0; importance 0, 1, .5
    assert scores[0].tolist() == pytest.approx([2.0, 0.5 + 1 / 3 + 1.0, 0.5])


def test_swapped_recency_only_changes_the_recency_factor() -> None:
    batch = generate_regime("D", 4, seed=2)
    parts = kernel_breakdown(batch)
    swapped = kernel_scorer(recency="exponential")(batch)
    expected = (parts.similarity * 0.5 ** (batch.ages_days / 30) * parts.salience
                + parts.episode_bonus) * parts.congruence
    np.testing.assert_allclose(swapped, expected)


def test_significance_sweep_names_and_weights() -> None:
    sweep = significance_sweep([0.0, 1.0])
    assert list(sweep) == ["significance_weight=0", "significance_weight=1"]
    batch = generate_regime("B", 5, seed=3)
    heavy = kernel_scores(batch, weights=RetrievalWeights(significance_weight=1.0))
    np.testing.assert_array_equal(sweep["significance_weight=1"](batch), heavy)


def test_a_zero_threshold_makes_even_a_zero_mood_polarized_as_in_the_scalar_kernel() -> None:
    rng = np.random.default_rng(7)
    batch = _random_batch(rng, queries=6, size=10)
    weights = RetrievalWeights(congruence_threshold=0.0)
    scores = kernel_scores(batch, weights=weights)
    for row in range(batch.n_queries):
        for col in range(batch.n_candidates):
            expected = candidate_score(
                float(batch.distances[row, col]), float(batch.ages_days[row, col]),
                bool(batch.episodes[row, col]), float(batch.significance[row, col]),
                int(batch.recall_counts[row, col]), weights=weights,
            ) * mood_congruence_factor(float(batch.memory_valences[row, col]),
                                       float(batch.mood_valence[row]), weights=weights)
            assert scores[row, col] == expected
