"""fit_weights: it recovers known weights and beats the defaults where they lose."""

from pathlib import Path

import numpy as np
import pytest

from affect_memory.experiments.data import LabelledQuery, QueryBatch
from affect_memory.experiments.fitting import fit_weights, split_queries
from affect_memory.experiments.scorers import similarity_scores
from affect_memory.experiments.synthetic import generate_from_weights, generate_regime
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from affect_memory.metrics import evaluate

TRUTH = RetrievalWeights(significance_weight=0.5, recency_horizon_days=30.0,
                         recency_floor=0.2, episode_bonus=0.1)


def test_fit_recovers_known_weights_within_tolerance() -> None:
    batch = generate_from_weights(TRUTH, 1000, seed=20261201)
    result = fit_weights(batch, seed=1)
    fitted = result.weights
    assert fitted.significance_weight == pytest.approx(0.5, abs=0.2)
    assert fitted.recency_horizon_days == pytest.approx(30.0, abs=10.0)
    assert fitted.recency_floor == pytest.approx(0.2, abs=0.1)
    assert fitted.episode_bonus == pytest.approx(0.1, abs=0.03)
    assert result.gain > 0.05


def test_fitted_weights_beat_the_defaults_on_held_out_queries_in_regime_a() -> None:
    batch = generate_regime("A", 400, seed=20261201)
    result = fit_weights(batch, seed=1)
    assert result.n_train == 280 and result.n_validation == 120
    assert result.validation_mrr > result.default_validation_mrr + 0.1
    assert result.gain == result.validation_mrr - result.default_validation_mrr
    # The fit finds its way back to (nearly) plain similarity: recency flattened, no bonus.
    assert result.weights.recency_floor >= 0.8
    assert result.weights.episode_bonus <= 0.03
    _, validation = split_queries(batch, validation_fraction=0.3, seed=1)
    similarity = evaluate(similarity_scores(validation), validation).mrr
    assert result.validation_mrr == pytest.approx(similarity, abs=0.05)


def test_fitting_is_deterministic_and_accepts_labelled_queries() -> None:
    batch = generate_regime("C", 60, seed=3)
    first = fit_weights(batch, seed=2)
    second = fit_weights(batch.to_queries(), seed=2)
    assert first == second
    assert first.train_mrr >= first.default_train_mrr


def test_the_split_is_seeded_and_disjoint() -> None:
    batch = generate_regime("A", 50, seed=0)
    train, validation = split_queries(batch, validation_fraction=0.3, seed=4)
    assert (train.n_queries, validation.n_queries) == (35, 15)
    rows = {tuple(row) for row in np.round(batch.distances, 12)}
    train_rows = {tuple(row) for row in np.round(train.distances, 12)}
    validation_rows = {tuple(row) for row in np.round(validation.distances, 12)}
    assert train_rows | validation_rows == rows and not train_rows & validation_rows


def test_a_custom_search_only_moves_the_named_weights() -> None:
    batch = generate_regime("B", 100, seed=6)
    result = fit_weights(batch, search={"significance_weight": [0.0, 0.5, 1.0, 2.0]})
    fitted = result.weights.model_dump()
    for name, value in DEFAULT_RETRIEVAL_WEIGHTS.model_dump().items():
        if name != "significance_weight":
            assert fitted[name] == value


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"search": {"nonsense": [1.0]}}, "not a RetrievalWeights field"),
        ({"search": {"recency_floor": [0.0]}}, "recency_floor"),
        ({"search": {"episode_bonus": []}}, "empty"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"max_rounds": 0}, "max_rounds"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    batch = generate_regime("A", 20, seed=0)
    with pytest.raises(InvalidInputError, match=message):
        fit_weights(batch, **kwargs)  # type: ignore[arg-type]


def _labelled(
    rng: np.random.Generator, user: str, targets: tuple[int, ...], outside: int = 0
) -> LabelledQuery:
    n = 8
    return LabelledQuery(
        distances=rng.uniform(0.2, 1.2, n),
        ages_days=rng.uniform(0, 200, n),
        significance=np.full(n, 0.5),
        recall_counts=np.zeros(n, dtype=np.int64),
        episodes=np.zeros(n, dtype=np.bool_),
        memory_valences=np.zeros(n),
        relevant=targets[0],
        also_relevant=targets[1:],
        user_id=user,
        outside=outside,
    )


def test_a_query_may_have_several_relevant_memories_and_ranks_by_its_best() -> None:
    from affect_memory.metrics import ranks

    rng = np.random.default_rng(5)
    query = _labelled(rng, "u", (6, 2))
    assert query.targets == (6, 2) and query.also_relevant == (2,)
    batch = QueryBatch.from_queries([query])
    scores = np.arange(8, dtype=np.float64)[None, ::-1].copy()  # candidate 0 best, 7 worst
    assert ranks(scores, batch.relevant, batch.mask, batch.targets).tolist() == [3]
    assert ranks(scores, batch.relevant, batch.mask).tolist() == [7]  # only the first label
    again = QueryBatch.from_queries(batch.to_queries())
    assert np.array_equal(again.targets, batch.targets) and again.users == ("u",)


def test_queries_naming_users_are_split_by_user_and_labels_outside_are_counted() -> None:
    rng = np.random.default_rng(7)
    users = [f"user-{i}" for i in range(6)]
    queries = [
        _labelled(rng, users[i % 6], (int(rng.integers(0, 8)),), outside=i % 2)
        for i in range(60)
    ]
    batch = QueryBatch.from_queries(queries)
    train, validation = split_queries(batch, validation_fraction=0.3, seed=3)
    assert not set(train.users) & set(validation.users)
    assert set(train.users) | set(validation.users) == set(users)
    assert validation.n_queries == 20  # two whole users of ten queries each: nearest to 18
    result = fit_weights(batch, seed=3, max_rounds=1)
    assert (result.n_train_users, result.n_validation_users) == (4, 2)
    assert result.labels_outside == 30 and result.labels == 90


def test_a_split_by_user_needs_two_users() -> None:
    rng = np.random.default_rng(1)
    batch = QueryBatch.from_queries([_labelled(rng, "solo", (1,)) for _ in range(10)])
    with pytest.raises(InvalidInputError, match="a split by user needs at least two"):
        split_queries(batch, validation_fraction=0.3, seed=0)


def test_fitted_weights_are_written_as_a_settings_file(tmp_path: Path) -> None:
    from affect_memory.memory.settings import RecallSettings, load_recall_settings

    batch = generate_from_weights(TRUTH, 300, seed=9)
    path = tmp_path / "fitted.json"
    result = fit_weights(batch, seed=1, settings_path=path)
    loaded = load_recall_settings(path)
    assert loaded.weights == result.weights
    assert loaded == result.settings(RecallSettings())
    wider = result.settings(RecallSettings(dense_candidates=256))
    assert wider.dense_candidates == 256 and wider.weights == result.weights
