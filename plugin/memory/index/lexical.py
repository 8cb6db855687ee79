"""Lexical search: one user's memories ranked by BM25 for a query, read in one snapshot.

The postings of the terms a process searches are kept in a bounded cache
(``PostingsCache``), so a common term (a speaker's name in half of the memories) is read from
the database once, not on every query. The cache never serves a stale posting: each user's
postings have a ``generation``, bumped by every transaction that changes them, which logs the
documents it touched (``index_changes``); a search reads the generation in its snapshot and,
when the cache is behind, re-reads the touched documents' postings first (or starts the user
over if the log no longer reaches back). The scores are the same bits with or without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from plugin.memory.index.analyzer import query_terms
from plugin.memory.index.backend import Tx
from plugin.memory.index.bm25 import TermPostings, postings_of, score_terms
from plugin.memory.index.documents import ALL_DOCS
from plugin.memory.index.schema import in_chunks, placeholders

__all__ = ["CACHE_POSTINGS", "LexicalHits", "PostingsCache", "search"]

CACHE_POSTINGS = 2_000_000
"""Postings a cache holds at most (24 bytes each: about 48 MB), least recently used out."""


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


@dataclass
class _UserPostings:
    """The cached terms of one user, all as of ``generation``."""

    generation: int
    next_doc: int
    """The user's next document key then: every key from it on is a document added since."""
    terms: dict[str, TermPostings] = field(default_factory=dict)


class PostingsCache:
    """Recently searched terms' postings per user, each user's as of one generation."""

    def __init__(self, capacity: int = CACHE_POSTINGS) -> None:
        """Hold at most ``capacity`` postings (0: cache nothing)."""
        self.capacity = capacity
        self._users: dict[int, _UserPostings] = {}
        self._order: OrderedDict[tuple[int, str], int] = OrderedDict()
        self._size = 0
        self._guard = threading.Lock()

    def view(self, key: int) -> _UserPostings | None:
        """A copy of what is cached for user ``key`` (safe to read while others update)."""
        with self._guard:
            cached = self._users.get(key)
            if cached is None:
                return None
            return _UserPostings(cached.generation, cached.next_doc, dict(cached.terms))

    def store(self, key: int, seen: int | None, fresh: _UserPostings) -> None:
        """Keep ``fresh`` for user ``key`` unless another search moved it on since ``seen``."""
        if self.capacity <= 0:
            return
        with self._guard:
            cached = self._users.get(key)
            current = None if cached is None else cached.generation
            if current is not None and current != seen and current >= fresh.generation:
                return  # another search already stored something at least as new
            for term in list(cached.terms) if cached is not None else []:
                self._size -= self._order.pop((key, term), 0)
            self._users[key] = fresh
            for term, postings in fresh.terms.items():
                self._order[(key, term)] = len(postings)
                self._size += len(postings)
            while self._size > self.capacity and self._order:
                (user, term), size = self._order.popitem(last=False)
                self._size -= size
                held = self._users.get(user)
                if held is not None:
                    held.terms.pop(term, None)

    def touch(self, key: int, terms: Sequence[str]) -> None:
        """Mark ``terms`` of user ``key`` as just used."""
        with self._guard:
            for term in terms:
                if (key, term) in self._order:
                    self._order.move_to_end((key, term))


def _fetch(tx: Tx, key: int, terms: Sequence[str]) -> dict[str, TermPostings]:
    """The postings of ``terms`` as the snapshot holds them."""
    grouped: dict[str, list[tuple[int, int, int]]] = {term: [] for term in terms}
    for part in in_chunks(list(terms)):
        for term, doc_key, tf, length in tx.rows(
            "SELECT term, doc_key, tf, length FROM index_postings "
            f"WHERE user_key = ? AND term IN ({placeholders(len(part))})",
            (key, *part),
        ):
            grouped[term].append((doc_key, tf, length))
    return {term: postings_of(rows) for term, rows in grouped.items()}


def _catch_up(
    tx: Tx, key: int, cached: _UserPostings, generation: int, next_doc: int
) -> _UserPostings | None:
    """``cached`` brought to ``generation`` from the change log; None if the log cannot."""
    oldest = tx.one("SELECT MIN(generation) FROM index_changes WHERE user_key = ?", (key,))
    if oldest is None or oldest[0] is None or int(oldest[0]) > cached.generation + 1:
        return None
    changed = sorted(
        {
            int(doc_key)
            for (doc_key,) in tx.rows(
                "SELECT doc_key FROM index_changes WHERE user_key = ? AND generation > ?",
                (key, cached.generation),
            )
        }
    )
    if ALL_DOCS in changed:
        return None
    added: dict[str, list[tuple[int, int, int]]] = {}
    for part in in_chunks(changed):
        for term, doc_key, tf, length in tx.rows(
            "SELECT term, doc_key, tf, length FROM index_postings "
            f"WHERE user_key = ? AND doc_key IN ({placeholders(len(part))})",
            (key, *part),
        ):
            if term in cached.terms:
                added.setdefault(term, []).append((doc_key, tf, length))
    # Documents added since were in no cached list; only older ones may have to leave one.
    gone = np.asarray([k for k in changed if k < cached.next_doc], dtype=np.int64)
    terms = dict(cached.terms)
    if len(gone):
        for term, postings in cached.terms.items():
            at = np.minimum(np.searchsorted(postings.doc_keys, gone), len(postings) - 1)
            if len(postings) and (postings.doc_keys[at] == gone).any():
                keep = ~np.isin(postings.doc_keys, gone, assume_unique=True)
                terms[term] = TermPostings(
                    postings.doc_keys[keep], postings.tf[keep], postings.lengths[keep]
                )
    for term, rows in added.items():
        kept, new = terms[term], postings_of(rows)
        keys = np.concatenate([kept.doc_keys, new.doc_keys])
        order = np.argsort(keys, kind="stable")
        terms[term] = TermPostings(
            keys[order],
            np.concatenate([kept.tf, new.tf])[order],
            np.concatenate([kept.lengths, new.lengths])[order],
        )
    return _UserPostings(generation, next_doc, terms)


def search(
    tx: Tx, key: int, query: str, limit: int, cache: PostingsCache | None = None
) -> LexicalHits:
    """The ``limit`` best BM25 matches of ``query`` among user ``key``'s memories.

    Ties are broken by memory id, so every backend returns the same list.
    """
    terms = query_terms(query)
    if not terms:
        return LexicalHits()
    totals = tx.one(
        "SELECT doc_count, total_length, generation, next_doc FROM index_users "
        "WHERE user_key = ?",
        (key,),
    )
    if totals is None or not totals[0]:
        return LexicalHits()
    generation, next_doc = int(totals[2]), int(totals[3])
    cached = None if cache is None else cache.view(key)
    seen = None if cached is None else cached.generation
    if cached is not None and cached.generation != generation:
        cached = _catch_up(tx, key, cached, generation, next_doc)
    view = cached if cached is not None else _UserPostings(generation, next_doc)
    missing = [term for term in terms if term not in view.terms]
    if missing:
        view.terms.update(_fetch(tx, key, missing))
    columns = [view.terms[term] for term in terms]
    if cache is not None:
        if missing or seen != generation:
            cache.store(key, seen, _UserPostings(generation, next_doc, dict(view.terms)))
        cache.touch(key, terms)
    doc_keys, scores = score_terms(columns, int(totals[0]), int(totals[1]))
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
