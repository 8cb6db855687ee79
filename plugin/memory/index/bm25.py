"""Okapi BM25 over one user's postings, computed in Python so every backend scores alike.

score(d, q) = sum over the distinct query terms t in d of
    idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))
with idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)) (Lucene's, never negative), k1 = 1.2,
b = 0.75, N the user's memories, avglen their mean length in terms. A document's terms are
added in the query's term order, so the sum has the same bits whatever order a database
returns the postings in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["K1", "B", "idf", "score_postings", "term_score"]

K1 = 1.2
"""Term-frequency saturation."""

B = 0.75
"""Length normalisation."""


def idf(n_docs: int, df: int) -> float:
    """Lucene's inverse document frequency of a term in ``df`` of ``n_docs`` documents."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


def term_score(tf: int, length: int, avg_length: float, term_idf: float) -> float:
    """One term's BM25 contribution to one document, in closed form (for checks and tests)."""
    norm = K1 * (1.0 - B + B * length / avg_length)
    return term_idf * tf * (K1 + 1.0) / (tf + norm)


def score_postings(
    terms: Sequence[str],
    rows: Sequence[tuple[str, int, int, int]],
    n_docs: int,
    total_length: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """BM25 of every document with a posting among ``rows``: (doc keys ascending, scores).

    ``rows`` are ``(term, doc key, tf, document length)``, one per document and term, for
    the distinct query ``terms``; ``n_docs`` and ``total_length`` are the user's totals.
    """
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    if not rows or n_docs <= 0 or total_length <= 0:
        return empty
    position = {term: index for index, term in enumerate(terms)}
    term_index = np.fromiter((position[row[0]] for row in rows), np.int64, len(rows))
    keys = np.fromiter((row[1] for row in rows), np.int64, len(rows))
    tf = np.fromiter((row[2] for row in rows), np.float64, len(rows))
    lengths = np.fromiter((row[3] for row in rows), np.float64, len(rows))
    df = np.bincount(term_index, minlength=len(terms)).astype(np.float64)
    idfs = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    avg_length = total_length / n_docs
    norm = K1 * (1.0 - B + B * lengths / avg_length)
    weights = idfs[term_index] * tf * (K1 + 1.0) / (tf + norm)
    doc_keys, slot = np.unique(keys, return_inverse=True)
    scores = np.zeros(len(doc_keys), dtype=np.float64)
    for index in range(len(terms)):
        of_term = term_index == index
        scores[slot[of_term]] += weights[of_term]
    return doc_keys.astype(np.int64), scores
