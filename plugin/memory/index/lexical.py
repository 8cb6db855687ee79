"""Lexical search: one user's memories ranked by BM25 for a query, read in one snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from plugin.memory.index.analyzer import query_terms
from plugin.memory.index.backend import Tx
from plugin.memory.index.bm25 import score_postings
from plugin.memory.index.schema import in_chunks, placeholders

__all__ = ["LexicalHits", "search"]


@dataclass(frozen=True, slots=True)
class LexicalHits:
    """A lexical search's memories, best first, with their BM25 scores (higher is better)."""

    ids: list[str] = field(default_factory=list)
    scores: npt.NDArray[np.float64] = field(
        default_factory=lambda: np.zeros(0, dtype=np.float64)
    )

    def __len__(self) -> int:
        """How many memories matched (at most the search's limit)."""
        return len(self.ids)


def search(tx: Tx, key: int, query: str, limit: int) -> LexicalHits:
    """The ``limit`` best BM25 matches of ``query`` among user ``key``'s memories.

    Ties are broken by memory id, so every backend returns the same list.
    """
    terms = query_terms(query)
    if not terms:
        return LexicalHits()
    totals = tx.one("SELECT doc_count, total_length FROM index_users WHERE user_key = ?", (key,))
    if totals is None or not totals[0]:
        return LexicalHits()
    rows: list[tuple[str, int, int, int]] = []
    for part in in_chunks(terms):
        rows.extend(
            tx.rows(
                "SELECT term, doc_key, tf, length FROM index_postings "
                f"WHERE user_key = ? AND term IN ({placeholders(len(part))})",
                (key, *part),
            )
        )
    doc_keys, scores = score_postings(terms, rows, int(totals[0]), int(totals[1]))
    if not len(doc_keys):
        return LexicalHits()
    if len(scores) > limit:
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        keep = scores >= cut  # every memory tied with the last place, for the id tie-break
        doc_keys, scores = doc_keys[keep], scores[keep]
    names: dict[int, str] = {}
    for part in in_chunks(doc_keys.tolist()):
        names.update(
            (int(doc_key), memory_id)
            for doc_key, memory_id in tx.rows(
                "SELECT doc_key, memory_id FROM index_docs "
                f"WHERE user_key = ? AND doc_key IN ({placeholders(len(part))})",
                (key, *part),
            )
        )
    ranked = sorted(
        zip(scores.tolist(), (names[int(k)] for k in doc_keys.tolist()), strict=True),
        key=lambda pair: (-pair[0], pair[1]),
    )[:limit]
    return LexicalHits(
        [memory_id for _, memory_id in ranked],
        np.asarray([score for score, _ in ranked], dtype=np.float64),
    )
