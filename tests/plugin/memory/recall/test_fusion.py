"""Fused relevance: the share of the query matched and the cosine, on absolute scales."""

import numpy as np
import pytest

from affect_memory.memory.recall.fusion import fuse


def test_fusion_weighs_the_share_matched_against_the_clipped_cosine() -> None:
    shares = np.array([1.0, 0.0, 0.5, 1.7])
    cosine = np.array([0.2, 0.9, -0.3, 1.0])
    parts = fuse(shares, cosine, 0.6)
    assert parts.lexical.tolist() == [1.0, 0.0, 0.5, 1.0]
    assert parts.dense.tolist() == [0.2, 0.9, 0.0, 1.0]
    assert parts.fused.tolist() == pytest.approx([0.68, 0.36, 0.3, 1.0])
    assert fuse(shares, cosine, 0.0).fused.tolist() == pytest.approx(parts.dense.tolist())


def test_a_member_s_relevance_does_not_depend_on_the_rest_of_its_pool() -> None:
    alone = fuse(np.array([0.8]), np.array([0.7]), 0.6).fused
    crowd = fuse(np.array([0.8, 0.1, 1.0]), np.array([0.7, 0.2, 0.95]), 0.6).fused
    assert alone[0] == pytest.approx(crowd[0]) == pytest.approx(0.76)
