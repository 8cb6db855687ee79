"""BM25 as closed-form values: Lucene idf, k1 1.2, b 0.75, summed in the query's term order."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from affect_memory.memory.index.lexical.bm25 import (
    idf,
    postings_of,
    score_postings,
    score_terms,
    term_score,
)
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS

K1, B = DEFAULT_RECALL_SETTINGS.bm25_k1, DEFAULT_RECALL_SETTINGS.bm25_b
"""The BM25 constants recall scores with."""


def okapi(tf: int, length: int, avg: float, n: int, df: int) -> float:
    """The textbook formula, written out independently of the module."""
    inverse = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return inverse * tf * (1.2 + 1) / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avg))


def test_the_constants_and_the_idf_are_lucenes() -> None:
    assert (K1, B) == (1.2, 0.75)
    assert idf(10, 1) == pytest.approx(math.log(1 + 9.5 / 1.5), rel=1e-15)
    assert idf(10, 10) == pytest.approx(math.log(1 + 0.5 / 10.5), rel=1e-15)
    assert idf(10, 10) > 0  # a term in every document still counts (FTS5's idf would be ~0)


def test_scores_equal_the_closed_form() -> None:
    # Three documents: d1 "bee bee roof" (3), d2 "bee garden" (2), d3 "roof" (1): N 3, 6 terms.
    rows = [("bee", 1, 2, 3), ("bee", 2, 1, 2), ("roof", 1, 1, 3), ("roof", 3, 1, 1)]
    keys, scores = score_postings(["bee", "roof"], rows, 3, 6, k1=K1, b=B)
    avg = 6 / 3
    expected = {
        1: okapi(2, 3, avg, 3, 2) + okapi(1, 3, avg, 3, 2),
        2: okapi(1, 2, avg, 3, 2),
        3: okapi(1, 1, avg, 3, 2),
    }
    assert keys.tolist() == [1, 2, 3]
    assert scores.tolist() == pytest.approx([expected[k] for k in (1, 2, 3)], rel=1e-12)
    assert scores[0] == pytest.approx(
        term_score(2, 3, avg, idf(3, 2), k1=K1, b=B) + term_score(1, 3, avg, idf(3, 2), k1=K1, b=B),
        rel=1e-12,
    )


def test_a_longer_document_scores_lower_for_the_same_tf() -> None:
    rows = [("bee", 1, 1, 2), ("bee", 2, 1, 10)]
    _, scores = score_postings(["bee"], rows, 4, 16, k1=K1, b=B)
    assert scores[0] > scores[1] > 0


def test_the_order_rows_arrive_in_never_changes_a_bit() -> None:
    rng = random.Random(3)
    terms = [f"t{i}" for i in range(6)]
    rows = [
        (term, doc, rng.randint(1, 4), rng.randint(1, 30))
        for doc in range(200)
        for term in rng.sample(terms, rng.randint(1, 6))
    ]
    lengths = {doc: length for _, doc, _, length in rows}  # one length per document
    rows = [(term, doc, tf, lengths[doc]) for term, doc, tf, _ in rows]
    keys, scores = score_postings(terms, rows, 500, 6000, k1=K1, b=B)
    for _ in range(5):
        rng.shuffle(rows)
        again_keys, again = score_postings(terms, rows, 500, 6000, k1=K1, b=B)
        assert np.array_equal(keys, again_keys) and np.array_equal(scores, again)


def test_nothing_to_score_gives_nothing() -> None:
    for rows, n, total in (([], 3, 6), ([("bee", 1, 1, 1)], 0, 0)):
        keys, scores = score_postings(["bee"], rows, n, total, k1=K1, b=B)
        assert len(keys) == 0 and len(scores) == 0


def test_a_cached_terms_kept_weights_never_outlive_what_they_were_weighed_from() -> None:
    """One postings object (a cached term) scored under other statistics and parameters and
    back gives each time the bits of postings never weighed before."""
    rng = random.Random(3)
    rows = [(key, rng.randint(1, 3), rng.randint(1, 30)) for key in range(0, 400, 3)]
    other = [(key, 1, rng.randint(1, 30)) for key in range(1, 400, 7)]
    shared = [postings_of(rows), postings_of(other)]
    for n_docs, total, k1, b in [(500, 6000, K1, B), (900, 6000, K1, B), (500, 9000, K1, B),
                                 (500, 6000, 2.0, B), (500, 6000, K1, 0.3), (500, 6000, K1, B)]:
        fresh = [postings_of(rows), postings_of(other)]
        keys, scores = score_terms(shared, n_docs, total, k1=k1, b=b)
        want_keys, want = score_terms(fresh, n_docs, total, k1=k1, b=b)
        assert keys.tolist() == want_keys.tolist()
        assert scores.tolist() == want.tolist()  # the same bits
        avg = total / n_docs
        assert scores[0] == pytest.approx(
            term_score(rows[0][1], rows[0][2], avg, idf(n_docs, len(rows)), k1=k1, b=b),
            rel=1e-12,
        )  # doc 0 holds only the first term
