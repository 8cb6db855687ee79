"""The LoCoMo protocol's plain BM25 baseline: no stemming, no folding, in memory.

This is the baseline the issue is judged against ("lower-cased alphanumeric tokens, a short
English stop list, k1 1.2 and b 0.75"), kept apart from the product's index (which also folds
accents and stems, and so scores higher): tokens are runs of ``[a-z0-9]`` of the lower-cased
text minus the same 68 stop words, a query is its distinct tokens, idf is Lucene's
``ln(1 + (N - df + 0.5) / (df + 0.5))``. Ties go to the memory stored first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["PlainBm25", "plain_tokens"]

K1 = 1.2
B = 0.75

_STOP_WORDS = frozenset(
    (
        "a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "about", "to",
        "from", "in", "on", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did",
        "have", "has", "had", "i", "you", "he", "she", "it", "we", "they", "me", "him", "her", "us",
        "them", "my", "your", "his", "its", "our", "their", "this", "that", "these", "those",
        "what", "which", "who", "whom", "when", "where", "why", "how",
    )
)
"""The 68 stop words of the protocol (the research's list, as the index's)."""

_TOKEN = re.compile(r"[a-z0-9]+")


def plain_tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric runs of ``text`` without the stop words, in order."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in _STOP_WORDS]


class PlainBm25:
    """Okapi BM25 over a fixed list of documents."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index ``texts`` under ``ids``."""
        self._ids = list(ids)
        self._counts = [Counter(plain_tokens(text)) for text in texts]
        self._lengths = np.array([sum(c.values()) for c in self._counts], dtype=np.float64)
        self._average = float(self._lengths.mean()) if len(self._lengths) else 0.0
        self._postings: dict[str, list[int]] = {}
        for index, counts in enumerate(self._counts):
            for term in counts:
                self._postings.setdefault(term, []).append(index)

    def top(self, query: str, limit: int) -> list[str]:
        """The ids of the ``limit`` best-scoring documents (only those sharing a term)."""
        n = len(self._ids)
        scores = np.zeros(n, dtype=np.float64)
        matched = np.zeros(n, dtype=bool)
        for term in dict.fromkeys(plain_tokens(query)):
            docs = self._postings.get(term)
            if not docs:
                continue
            idf = math.log1p((n - len(docs) + 0.5) / (len(docs) + 0.5))
            for index in docs:
                tf = self._counts[index][term]
                norm = K1 * (1.0 - B + B * self._lengths[index] / self._average)
                scores[index] += idf * tf * (K1 + 1.0) / (tf + norm)
                matched[index] = True
        candidates = np.flatnonzero(matched)
        order = candidates[np.lexsort((candidates, -scores[candidates]))]
        return [self._ids[i] for i in order[:limit]]
