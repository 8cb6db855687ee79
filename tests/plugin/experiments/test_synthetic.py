"""The synthetic generator: seeded determinism, and signal only where a regime puts it."""

import numpy as np
import pytest

from affect_memory.experiments.data import QueryBatch
from affect_memory.experiments.scorers import kernel_scores, similarity_scores
from affect_memory.experiments.synthetic import REGIMES, generate_from_weights, generate_regime
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import RetrievalWeights
from affect_memory.metrics import evaluate

FIELDS = ("distances", "ages_days", "significance", "recall_counts", "episodes",
          "memory_valences", "mood_valence", "relevant", "mask")


def _same(left: QueryBatch, right: QueryBatch) -> bool:
    return all(np.array_equal(getattr(left, name), getattr(right, name)) for name in FIELDS)


@pytest.mark.parametrize("regime", REGIMES)
def test_the_same_seed_gives_the_same_batch(regime: str) -> None:
    assert _same(generate_regime(regime, 50, seed=7), generate_regime(regime, 50, seed=7))  # type: ignore[arg-type]
    assert not _same(generate_regime(regime, 50, seed=7), generate_regime(regime, 50, seed=8))  # type: ignore[arg-type]


def _relevant_and_other(batch: QueryBatch, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(batch.n_queries)
    relevant = values[rows, batch.relevant].astype(float)
    others = np.ones(values.shape, dtype=bool)
    others[rows, batch.relevant] = False
    return relevant, values[others].astype(float)


def _indistinguishable(relevant: np.ndarray, other: np.ndarray) -> bool:
    # Means within 4 standard errors: a false alarm about once in 15,000 checks.
    error = np.sqrt(relevant.var() / relevant.size + other.var() / other.size)
    return bool(abs(relevant.mean() - other.mean()) <= 4 * error)


def test_in_regime_a_only_similarity_depends_on_relevance() -> None:
    batch = generate_regime("A", 2000, seed=11)
    for name in ("ages_days", "significance", "recall_counts", "episodes", "memory_valences"):
        assert _indistinguishable(*_relevant_and_other(batch, getattr(batch, name))), name
    relevant, other = _relevant_and_other(batch, batch.distances)
    assert relevant.mean() < other.mean()
    # The relevant index itself is uniform over the 20 slots.
    counts = np.bincount(batch.relevant, minlength=20)
    assert counts.min() > 2000 / 20 * 0.6


def test_similarity_distributions_overlap() -> None:
    batch = generate_regime("A", 400, seed=5)
    recall_at_1 = evaluate(similarity_scores(batch), batch).recall_at_1
    assert 0.1 < recall_at_1 < 0.5


def test_informative_regimes_carry_their_signal() -> None:
    salience = generate_regime("B", 1000, seed=2)
    relevant, other = _relevant_and_other(salience, salience.significance)
    assert relevant.mean() > other.mean() + 0.2
    recency = generate_regime("C", 1000, seed=2)
    relevant, other = _relevant_and_other(recency, recency.ages_days)
    assert relevant.mean() < other.mean() / 3
    assert _indistinguishable(*_relevant_and_other(recency, recency.significance))


def test_in_regime_e_the_relevant_memory_matches_the_mood_three_times_in_four() -> None:
    batch = generate_regime("E", 4000, seed=9)
    same = np.sign(batch.memory_valences) == np.sign(batch.mood_valence)[:, None]
    relevant, other = _relevant_and_other(batch, same)
    assert relevant.mean() == pytest.approx(0.75, abs=0.03)
    assert other.mean() == pytest.approx(0.5, abs=0.02)
    assert np.all(np.abs(batch.mood_valence) >= 0.3)


def test_labels_from_known_weights_favour_those_weights() -> None:
    truth = RetrievalWeights(significance_weight=0.5, recency_horizon_days=30.0,
                             recency_floor=0.2, episode_bonus=0.1)
    batch = generate_from_weights(truth, 300, seed=4)
    true_mrr = evaluate(kernel_scores(batch, weights=truth), batch).mrr
    assert true_mrr > evaluate(kernel_scores(batch), batch).mrr
    assert true_mrr > 0.85


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="regime"):
        generate_regime("F", 10, seed=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="n_queries"):
        generate_regime("A", 0, seed=0)
