"""Okapi BM25 over one user's postings, computed in Python so every backend scores alike.

score(d, q) = sum over the distinct query terms t in d of
    idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))
with idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)) (Lucene's, never negative), k1 and b the
recall settings' ``bm25_k1`` and ``bm25_b`` (1.2 and 0.75 by default), N the user's memories,
avglen their mean length in terms. A document's terms are
added in the query's term order, so the sum has the same bits whatever order a database
returns the postings in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["idf", "score_postings", "term_score"]

_Weighing = tuple[float, float, float, float]
"""What a term's weights are computed from: its idf, the mean length, k1 and b."""

_DENSE_SPAN = 8
"""Scores are summed in an array over every key up to the highest when that array is at most
this many times the postings (plus a little): keys are dense unless most memories left."""


def idf(n_docs: int, df: int) -> float:
    """Lucene's inverse document frequency of a term in ``df`` of ``n_docs`` documents."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


def term_score(
    tf: int, length: int, avg_length: float, term_idf: float, *, k1: float, b: float
) -> float:
    """One term's BM25 contribution to one document, in closed form (for checks and tests)."""
    norm = k1 * (1.0 - b + b * length / avg_length)
    return term_idf * tf * (k1 + 1.0) / (tf + norm)


@dataclass(frozen=True, slots=True)
class TermPostings:
    """One term's postings in a user's index: documents ascending, their tf and lengths."""

    doc_keys: npt.NDArray[np.int64]
    tf: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.float64]
    _weighed: list[tuple[_Weighing, npt.NDArray[np.float64]]] = field(
        default_factory=list, compare=False, repr=False
    )
    """The last weights computed, with what they were computed from (at most one)."""

    def __len__(self) -> int:
        """The term's document frequency."""
        return len(self.doc_keys)

    def weights(
        self, term_idf: np.float64, avg_length: float, k1: float, b: float
    ) -> npt.NDArray[np.float64]:
        """The term's BM25 contribution to each document in its postings, kept for the next
        query that weighs it alike (a cached term is shared: a common word's postings are
        weighed once per change of the user's memories, not once per query)."""
        key = (float(term_idf), avg_length, k1, b)
        last = self._weighed[:1]
        if last and last[0][0] == key:
            return last[0][1]
        weights = _bm25(self.tf, self.lengths, term_idf, avg_length, k1, b)
        self._weighed[:] = [(key, weights)]  # one assignment: a reader sees old or new
        return weights


def score_terms(
    postings: Sequence[TermPostings], n_docs: int, total_length: int, *, k1: float, b: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """BM25 of every document in ``postings`` (one entry per distinct query term, in the
    query's order) with ``k1`` and ``b``: (doc keys ascending, scores)."""
    present = [term for term in postings if len(term)]
    if not present or n_docs <= 0 or total_length <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    df = np.asarray([len(term) for term in present], dtype=np.float64)
    idfs = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    avg_length = total_length / n_docs
    keys = [term.doc_keys for term in present]
    highest = max(int(k[-1]) for k in keys)
    if highest < _DENSE_SPAN * sum(len(k) for k in keys) + 1024:
        # Document keys are dense (they count up per user): sum into an array indexed by key,
        # which needs no sort. ``bincount`` adds in the order given, the query's term order,
        # so the sums keep their bits.
        every = np.concatenate(keys)
        weights = np.concatenate(
            [term.weights(idfs[at], avg_length, k1, b) for at, term in enumerate(present)]
        )
        dense = np.bincount(every, weights=weights, minlength=highest + 1).astype(np.float64)
        if (weights > 0).all():  # then a document holds a term exactly when its sum is positive
            doc_keys = np.flatnonzero(dense)
        else:
            doc_keys = np.flatnonzero(np.bincount(every, minlength=highest + 1))
        return doc_keys.astype(np.int64), dense[doc_keys]
    doc_keys, slot = np.unique(np.concatenate(keys), return_inverse=True)
    scores = np.zeros(len(doc_keys), dtype=np.float64)
    start = 0
    for index, term in enumerate(present):
        scores[slot[start : start + len(term)]] += term.weights(idfs[index], avg_length, k1, b)
        start += len(term)
    return doc_keys.astype(np.int64), scores


def _bm25(
    tf: npt.NDArray[np.float64],
    lengths: npt.NDArray[np.float64],
    term_idf: np.float64,
    avg_length: float,
    k1: float,
    b: float,
) -> npt.NDArray[np.float64]:
    """BM25 contributions of postings ``tf`` in documents of ``lengths``, with the closed
    form's operations in its order."""
    norm = k1 * (1.0 - b + b * lengths / avg_length)
    weights: npt.NDArray[np.float64] = term_idf * tf * (k1 + 1.0) / (tf + norm)
    return weights


def postings_of(rows: Sequence[tuple[int, int, int]]) -> TermPostings:
    """One term's postings from ``(doc key, tf, length)`` rows in any order."""
    keys = np.fromiter((row[0] for row in rows), np.int64, len(rows))
    order = np.argsort(keys, kind="stable")
    return TermPostings(
        keys[order],
        np.fromiter((row[1] for row in rows), np.float64, len(rows))[order],
        np.fromiter((row[2] for row in rows), np.float64, len(rows))[order],
    )


def score_postings(
    terms: Sequence[str],
    rows: Sequence[tuple[str, int, int, int]],
    n_docs: int,
    total_length: int,
    *,
    k1: float,
    b: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """BM25 of every document with a posting among ``rows``: (doc keys ascending, scores).

    ``rows`` are ``(term, doc key, tf, document length)``, one per document and term, for
    the distinct query ``terms``; ``n_docs`` and ``total_length`` are the user's totals.
    """
    grouped: dict[str, list[tuple[int, int, int]]] = {term: [] for term in terms}
    for term, doc_key, tf, length in rows:
        grouped[term].append((doc_key, tf, length))
    columns = [postings_of(grouped[term]) for term in terms]
    return score_terms(columns, n_docs, total_length, k1=k1, b=b)
