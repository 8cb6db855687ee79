"""Fused relevance: BM25 and cosine, each min-max scaled over the pool, mixed by the weight."""

import numpy as np
import pytest

from plugin.memory.fusion import fuse, min_max


def test_min_max_scales_to_the_unit_interval_and_a_flat_pool_to_zero() -> None:
    assert min_max(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert min_max(np.array([0.7, 0.7])).tolist() == [0.0, 0.0]
    assert min_max(np.zeros(0)).tolist() == []


def test_the_best_lexical_and_the_best_dense_member_each_score_their_share() -> None:
    bm25 = np.array([8.0, 0.0, 2.0])
    cosine = np.array([0.2, 0.6, 0.4])
    parts = fuse(bm25, cosine, 0.6)
    assert parts.lexical.tolist() == pytest.approx([1.0, 0.0, 0.25])
    assert parts.dense.tolist() == pytest.approx([0.0, 1.0, 0.5])
    assert parts.fused.tolist() == pytest.approx([0.6, 0.4, 0.35])


def test_fusion_ignores_the_scale_of_bm25() -> None:
    cosine = np.array([0.2, 0.6, 0.4])
    small = fuse(np.array([1.0, 0.0, 0.5]), cosine, 0.6).fused
    large = fuse(np.array([100.0, 0.0, 50.0]), cosine, 0.6).fused
    assert small.tolist() == pytest.approx(large.tolist())
