"""The closest member's feedback: each member's cosine blended with its resemblance to the
pool member closest to the query, the closest keeping its own, members without an embedding
left as they are."""

from __future__ import annotations

import numpy as np
import pytest

from affect_memory.memory.recall.feedback import closest_feedback
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS

WEIGHT = DEFAULT_RECALL_SETTINGS.feedback_weight


def _unit(*vector: float) -> list[float]:
    array = np.asarray(vector, dtype=np.float64)
    return list(array / np.linalg.norm(array))


def test_each_member_blends_its_cosine_with_its_resemblance_to_the_closest() -> None:
    # the query's cosines, and vectors: the closest is member 1, member 2 resembles it
    cosines = np.array([0.2, 0.6, 0.1, 0.3])
    members = np.array([_unit(0, 0, 1), _unit(1, 0, 0), _unit(1, 1, 0), _unit(0, 1, 0)])
    found = closest_feedback(cosines, members, np.ones(4, dtype=bool), WEIGHT)
    assert pytest.approx(0.15) == WEIGHT
    assert found.closest_at == 1
    assert found.closest.tolist() == pytest.approx([0.0, 0.6, 2**-0.5, 0.0])
    assert found.cosines.tolist() == pytest.approx(
        [0.85 * 0.2, 0.6, 0.85 * 0.1 + 0.15 * 2**-0.5, 0.85 * 0.3]
    )


def test_resemblance_is_a_cosine_whatever_the_vectors_lengths() -> None:
    cosines = np.array([0.9, 0.4])
    short = closest_feedback(
        cosines, np.array([[2.0, 0.0], [3.0, 3.0]]), np.ones(2, dtype=bool), WEIGHT
    )
    assert short.closest[1] == pytest.approx(2**-0.5)


def test_members_without_an_embedding_keep_their_cosine_and_cannot_be_the_closest() -> None:
    cosines = np.array([0.9, 0.5, 0.4])
    members = np.array([[0.0, 0.0], _unit(1, 0), _unit(1, 1)])
    present = np.array([False, True, True])
    found = closest_feedback(cosines, members, present, WEIGHT)
    assert found.closest_at == 1  # the first member's cosine is higher, but it has no vector
    assert found.cosines[0] == pytest.approx(0.9)
    assert found.cosines[1] == pytest.approx(0.5)
    assert found.cosines[2] == pytest.approx(0.85 * 0.4 + 0.15 * 2**-0.5)
    none = closest_feedback(cosines, members, np.zeros(3, dtype=bool), WEIGHT)
    assert none.closest_at is None
    assert none.cosines.tolist() == pytest.approx(cosines.tolist())


def test_a_tie_for_the_closest_goes_to_the_first_and_a_zero_weight_turns_it_off() -> None:
    cosines = np.array([0.1, 0.5, 0.5])
    members = np.array([_unit(1, 1), _unit(1, 0), _unit(0, 1)])
    found = closest_feedback(cosines, members, np.ones(3, dtype=bool), WEIGHT)
    assert found.closest_at == 1
    assert found.closest[2] == pytest.approx(0.0)
    off = closest_feedback(cosines, members, np.ones(3, dtype=bool), 0.0)
    assert off.cosines.tolist() == pytest.approx(cosines.tolist())
