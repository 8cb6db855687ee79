"""Fused relevance: a query's lexical and dense match, each on an absolute scale.

``relevance = w * share + (1 - w) * max(0, cosine)``, where ``share`` is the share of the
query a memory matches (its BM25 over the query's total idf, at most 1:
``QueryPool.lexical_share``). Neither part is scaled over the pool, so a relevance means the
same from query to query and a lone memory that matches well scores high (a store holding only
"I keep bees on the roof" gives "bees" its cosine and a full share). The lexical weight ``w``
is 0.6 by default: on the LoCoMo dev half this absolute fusion was flat from 0.6 to 0.7
(MRR@10 0.493 at both, 0.481 at 0.5 and 0.480 at 0.9, measured offline on the whole
conversation), and reciprocal-rank fusion scored below BM25 alone there (docs/evaluation/locomo.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["FusedRelevance", "fuse"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FusedRelevance:
    """Each pool member's fused relevance and the two parts it was made of."""

    fused: FloatArray
    """In [0, 1]: what the kernel's similarity becomes."""
    lexical: FloatArray
    """The share of the query each member matches (0 for those the lexical search did not
    return)."""
    dense: FloatArray
    """The cosine, clipped to [0, 1]."""


def fuse(shares: FloatArray, cosine: FloatArray, lexical_weight: float) -> FusedRelevance:
    """The fused relevance of a pool from its lexical shares and cosines."""
    lexical = np.clip(np.asarray(shares, dtype=np.float64), 0.0, 1.0)
    dense = np.clip(np.asarray(cosine, dtype=np.float64), 0.0, 1.0)
    fused = np.clip(lexical_weight * lexical + (1.0 - lexical_weight) * dense, 0.0, 1.0)
    return FusedRelevance(fused, lexical, dense)
