"""Labelled queries and batches: validation, padding and round trips."""

import numpy as np
import pytest

from affect_memory.experiments.data import LabelledQuery, QueryBatch
from affect_memory.experiments.synthetic import generate_regime
from affect_memory.kernel.errors import InvalidInputError


def _query(size: int, relevant: int, mood: float = 0.0) -> LabelledQuery:
    return LabelledQuery(
        distances=np.linspace(0.2, 1.0, size),
        ages_days=np.arange(size, dtype=float),
        significance=np.full(size, 0.5),
        recall_counts=np.arange(size),
        episodes=np.arange(size) % 2 == 0,
        memory_valences=np.zeros(size),
        relevant=relevant,
        mood_valence=mood,
    )


def test_shorter_queries_are_padded_and_masked() -> None:
    batch = QueryBatch.from_queries([_query(3, 2), _query(5, 4, mood=-0.5)])
    assert batch.distances.shape == (2, 5)
    assert batch.mask.sum(axis=1).tolist() == [3, 5]
    assert batch.relevant.tolist() == [2, 4]
    assert batch.mood_valence.tolist() == [0.0, -0.5]


def test_batch_to_queries_round_trip() -> None:
    batch = generate_regime("E", 6, seed=3)
    again = QueryBatch.from_queries(batch.to_queries())
    for name in ("distances", "ages_days", "significance", "recall_counts", "episodes",
                 "memory_valences", "mood_valence", "relevant", "mask"):
        np.testing.assert_array_equal(getattr(again, name), getattr(batch, name))


def test_take_keeps_the_chosen_rows_in_order() -> None:
    batch = generate_regime("A", 5, seed=1)
    part = batch.take([4, 0])
    np.testing.assert_array_equal(part.distances, batch.distances[[4, 0]])
    np.testing.assert_array_equal(part.relevant, batch.relevant[[4, 0]])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"relevant": 3}, "relevant"),
        ({"relevant": True}, "relevant"),
        ({"distances": [0.1, 2.5, 0.3]}, "distances"),
        ({"ages_days": [1.0, 2.0]}, "ages_days"),
        ({"memory_valences": [0.0, 0.0, 1.5]}, "memory_valences"),
        ({"mood_valence": 2.0}, "mood_valence"),
        ({"significance": [0.1, float("nan"), 0.2]}, "significance"),
    ],
)
def test_labelled_query_refuses_bad_features(change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "distances": [0.1, 0.2, 0.3],
        "ages_days": [1.0, 2.0, 3.0],
        "significance": [0.0, 0.5, 1.0],
        "recall_counts": [0, 1, 2],
        "episodes": [False, True, False],
        "memory_valences": [0.0, -0.5, 0.5],
        "relevant": 1,
    }
    fields.update(change)
    with pytest.raises(InvalidInputError, match=message):
        LabelledQuery(**fields)  # type: ignore[arg-type]


def test_features_are_read_only() -> None:
    query = _query(3, 0)
    with pytest.raises(ValueError, match="read-only"):
        query.distances[0] = 0.0
