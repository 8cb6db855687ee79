"""Ranking metrics on closed-form cases, including ties, padding and cut-offs."""

import numpy as np
import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.metrics import (
    first_rank,
    hit_at_k,
    mean_reciprocal_rank,
    ranks,
    recall_at_k,
    reciprocal_rank,
    share_at_k,
)


def test_rank_counts_the_candidates_scored_above_the_relevant_one() -> None:
    scores = np.array([[0.9, 0.5, 0.1], [0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    assert ranks(scores, np.array([0, 0, 1])).tolist() == [1, 3, 2]


def test_ties_count_against_the_relevant_candidate() -> None:
    scores = np.array([[0.5, 0.5, 0.5, 0.1]])
    assert ranks(scores, np.array([1])).tolist() == [3]


def test_a_constant_scorer_ranks_the_relevant_memory_last() -> None:
    assert ranks(np.zeros((2, 20)), np.array([0, 7])).tolist() == [20, 20]


def test_masked_candidates_never_count() -> None:
    scores = np.array([[0.2, 0.9, 0.1]])
    mask = np.array([[True, False, True]])
    assert ranks(scores, np.array([0]), mask).tolist() == [1]


def test_mrr_and_recall_on_known_ranks() -> None:
    rank = np.array([1, 2, 4, 10])
    assert mean_reciprocal_rank(rank) == pytest.approx((1 + 0.5 + 0.25 + 0.1) / 4)
    assert recall_at_k(rank, 1) == 0.25
    assert recall_at_k(rank, 5) == 0.75
    assert recall_at_k(rank, 10) == 1.0


def test_a_ranking_of_ids_scores_its_first_relevant_id() -> None:
    ranked = ["a", "b", "c", "d", "e"]
    assert first_rank(ranked, {"c", "e"}) == 3
    assert reciprocal_rank(ranked, {"c", "e"}) == 1 / 3
    assert reciprocal_rank(ranked, {"c"}, cutoff=2) == 0.0  # beyond the cut-off: none
    assert first_rank(ranked, {"z"}) is None and reciprocal_rank(ranked, {"z"}) == 0.0


def test_the_share_and_the_hit_read_only_the_top_k() -> None:
    ranked = ["a", "b", "c", "d"]
    assert share_at_k(ranked, ["b", "d", "d"], 2) == 0.5  # distinct relevant ids
    assert share_at_k(ranked, ["b", "d"], 10) == 1.0
    assert hit_at_k(ranked, {"d"}, 3) == 0.0 and hit_at_k(ranked, {"d"}, 4) == 1.0


def test_invalid_inputs_are_refused_with_the_argument_named() -> None:
    with pytest.raises(InvalidInputError, match="relevant"):
        ranks(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(InvalidInputError, match="finite"):
        ranks(np.array([[np.nan, 1.0]]), np.array([0]))
    with pytest.raises(InvalidInputError, match="k must"):
        recall_at_k(np.array([1]), 0)
    with pytest.raises(InvalidInputError, match="ranks"):
        mean_reciprocal_rank(np.array([0]))
    with pytest.raises(InvalidInputError, match="cutoff must"):
        first_rank(["a"], {"a"}, cutoff=0)
    with pytest.raises(InvalidInputError, match="relevant must name"):
        share_at_k(["a"], [], 1)
