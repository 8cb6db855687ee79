"""Lexical search: one user's memories ranked by BM25 for a query, read in one snapshot.

The postings of the terms a process searches are kept in a bounded cache (``PostingsCache``), so
a common term (a speaker's name in half of the memories) is read from the database once, not on
every query. A user whose total length in terms (never less than their postings) is at most a
quarter of the cache is read whole on its first miss (one ordered scan instead of one long read
per new term): later searches then read nothing but the user's totals and the winners' ids.

The cache never serves a stale posting: each user's postings have a ``generation``, bumped by
every transaction that changes them, which logs the documents it touched (``index_changes``);
a search reads the generation in its snapshot and, when the cache is behind, re-reads the
touched documents' postings first (or starts the user over if the log no longer reaches
back). The scores are the same bits with or without it.

Asked which ids the caller already has (``known``: the query's dense candidates), a search
also reads, in its snapshot, the embeddings the index holds of the other hits (``absent``),
so recall computes their cosine without reading Chroma. ``search_pool`` is what recall reads
of a hybrid query's pool, in one snapshot: the search, whose hits' whole rows come with their
ids, and the rows of the dense candidates the hits lack (unless recall reads those as its
ranking reaches them, ``affect_memory.memory.recall.members``).

With a filter (``where``, ``affect_memory.memory.filters``) only the memories whose tags meet
it compete for the ``limit`` places, read in the same snapshot; BM25's statistics stay the
user's (a memory scores the same filtered or not).

The module is about 500 lines because the postings cache and the searches that read through it share
the generation protocol above; split, the cache's rule against stale postings would sit apart from
the readers that rely on it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from affect_memory.memory.filters import MemoryFilter, index_condition
from affect_memory.memory.index.consistency.documents import ALL_DOCS
from affect_memory.memory.index.consistency.rehearsal import (
    IndexRow,
    Rehearsal,
    read_rows,
    rehearsal_of,
)
from affect_memory.memory.index.lexical.analyzer import query_terms
from affect_memory.memory.index.lexical.bm25 import TermPostings, idf, postings_of, score_terms
from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.index.storage.schema import in_chunks, placeholders

__all__ = [
    "CACHE_POSTINGS",
    "FilteredMembers",
    "LexicalHits",
    "PoolRows",
    "PostingsCache",
    "document_frequencies",
    "filtered_docs",
    "filtered_members",
    "search",
    "search_pool",
]

CACHE_POSTINGS = 2_000_000
"""Postings a cache holds at most (24 bytes each, 32 once a search has weighed them: about
48-64 MB), least recently used out."""

WHOLE_USER_SHARE = 4
"""A user is read whole when their postings are at most this fraction (1/4) of the cache."""


@dataclass(frozen=True, slots=True)
class LexicalHits:
    """A lexical search's memories, best first, with their BM25 scores (higher is better)."""

    ids: list[str] = field(default_factory=list)
    scores: npt.NDArray[np.float64] = field(
        default_factory=lambda: np.zeros(0, dtype=np.float64)
    )
    absent: list[str] | None = None
    """The hits the search's ``known`` ids lack, in the index's document order (the order
    Chroma keeps them in, as a ``get`` returns them); None when no ``known`` was given."""
    vectors: list[bytes | None] = field(default_factory=list)
    """Each ``absent`` hit's embedding as the index holds it (little-endian float32 bytes, or
    float64 where Chroma's client returned values float32 does not hold);
    None where the index lacks it or a write or forget of it is in flight (its journal entry
    is pending), so the caller reads that one from Chroma."""
    idf_total: float = 0.0
    """The sum of the query's terms' idf in the user's memories: the BM25 of a memory of
    average length holding each term once, which scales BM25 to a share of the query matched."""

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
    complete: bool = False
    """Every term of the user is held: a term not in ``terms`` occurs in no memory."""


@dataclass(frozen=True, slots=True)
class _Lookup:
    """What a cache holds of one user for one query's terms."""

    generation: int
    complete: bool
    found: dict[str, TermPostings]


class PostingsCache:
    """Recently searched terms' postings per user, each user's as of one generation."""

    def __init__(self, capacity: int = CACHE_POSTINGS, *, whole_users: bool = True) -> None:
        """Hold at most ``capacity`` postings (0: cache nothing); ``whole_users``: read a
        small enough user's postings all at once."""
        self.capacity = capacity
        self.whole_users = whole_users
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
            return _UserPostings(
                cached.generation, cached.next_doc, dict(cached.terms), cached.complete
            )

    def lookup(self, key: int, terms: Sequence[str]) -> _Lookup | None:
        """The cached postings of ``terms`` for user ``key``, marked used (no copy of the rest)."""
        with self._guard:
            cached = self._users.get(key)
            if cached is None:
                return None
            found = {term: cached.terms[term] for term in terms if term in cached.terms}
            for term in found:
                self._order.move_to_end((key, term))
            return _Lookup(cached.generation, cached.complete, found)

    def holds_whole(self, total_length: int) -> bool:
        """Whether a user whose memories hold ``total_length`` terms in all (repeats counted,
        so at least their postings) is read whole."""
        return self.whole_users and total_length <= self.capacity // WHOLE_USER_SHARE

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
                    held.complete = False


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


def _fetch_user(tx: Tx, key: int) -> dict[str, TermPostings]:
    """Every posting of user ``key`` as the snapshot holds them, by term."""
    grouped: dict[str, list[tuple[int, int, int]]] = {}
    for term, doc_key, tf, length in tx.rows(
        "SELECT term, doc_key, tf, length FROM index_postings WHERE user_key = ? "
        "ORDER BY term, doc_key",
        (key,),
    ):
        rows = grouped.get(term)
        if rows is None:
            grouped[term] = rows = []
        rows.append((doc_key, tf, length))
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
            if cached.complete or term in cached.terms:
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
        new = postings_of(rows)
        kept = terms.get(term)
        if kept is None:  # a complete view's new term
            terms[term] = new
            continue
        keys = np.concatenate([kept.doc_keys, new.doc_keys])
        order = np.argsort(keys, kind="stable")
        terms[term] = TermPostings(
            keys[order],
            np.concatenate([kept.tf, new.tf])[order],
            np.concatenate([kept.lengths, new.lengths])[order],
        )
    return _UserPostings(generation, next_doc, terms, cached.complete)


_NO_POSTINGS = TermPostings(
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.float64)
)


def _postings(
    tx: Tx, key: int, terms: Sequence[str], totals: Sequence[Any], cache: PostingsCache | None
) -> list[TermPostings]:
    """The postings of ``terms`` as of the snapshot, from the cache where it is current."""
    generation, next_doc = int(totals[2]), int(totals[3])
    if cache is None:
        fetched = _fetch(tx, key, terms)
        return [fetched[term] for term in terms]
    hit = cache.lookup(key, terms)
    current = hit is not None and hit.generation == generation
    if hit is not None and current and (hit.complete or len(hit.found) == len(terms)):
        return [hit.found.get(term, _NO_POSTINGS) for term in terms]  # the usual case
    cached = cache.view(key) if hit is not None else None
    seen = None if cached is None else cached.generation
    if cached is not None and cached.generation != generation:
        cached = _catch_up(tx, key, cached, generation, next_doc)
    view = cached if cached is not None else _UserPostings(generation, next_doc)
    missing = [term for term in terms if term not in view.terms and not view.complete]
    if missing and not view.complete and cache.holds_whole(int(totals[1])):
        view = _UserPostings(generation, next_doc, _fetch_user(tx, key), complete=True)
    elif missing:
        view.terms.update(_fetch(tx, key, missing))
    columns = [view.terms.get(term, _NO_POSTINGS) for term in terms]
    if missing or seen != generation:
        cache.store(key, seen, view)  # the cache owns ``view`` from here (it may evict terms)
    return columns


def _absent_vectors(
    tx: Tx, key: int, doc_keys: dict[str, int], known: Collection[str]
) -> tuple[list[str], list[bytes | None]]:
    """The hits (memory id -> document key) not in ``known``, in document order, and the
    embeddings the index holds of them (None: read it from Chroma)."""
    absent = sorted((doc_key, ident) for ident, doc_key in doc_keys.items() if ident not in known)
    if not absent:
        return [], []
    keys = [doc_key for doc_key, _ in absent]
    blobs: dict[int, bytes | None] = {}
    for part in in_chunks(keys):
        blobs.update(
            # a pending journal entry (a write or forget in flight): read it from Chroma
            (int(doc_key), None if blob is None or moving is not None else bytes(blob))
            for doc_key, blob, moving in tx.rows(
                "SELECT d.doc_key, d.embedding, j.memory_id FROM index_docs d "
                "LEFT JOIN index_journal j ON j.user_key = d.user_key "
                "AND j.memory_id = d.memory_id "
                f"WHERE d.user_key = ? AND d.doc_key IN ({placeholders(len(part))})",
                (key, *part),
            )
        )
    return [ident for _, ident in absent], [blobs.get(doc_key) for doc_key, _ in absent]


def _user_totals(tx: Tx, key: int) -> tuple[Any, ...] | None:
    """User ``key``'s memory count, total length, postings generation and next document key
    as the snapshot holds them, or None for a user the index has never seen."""
    return tx.one(
        "SELECT doc_count, total_length, generation, next_doc FROM index_users "
        "WHERE user_key = ?",
        (key,),
    )


def filtered_docs(tx: Tx, key: int, where: MemoryFilter) -> npt.NDArray[np.int64]:
    """The document keys of user ``key``'s memories whose tags meet ``where``, sorted."""
    condition, params = index_condition(where)
    rows = tx.rows(
        f"SELECT d.doc_key FROM index_docs d WHERE d.user_key = ? AND {condition}",
        (key, *params),
    )
    return np.sort(np.asarray([int(row[0]) for row in rows], dtype=np.int64))


@dataclass(frozen=True, slots=True)
class FilteredMembers:
    """How many of a user's memories meet a filter, and those a caller lacks with their
    embeddings (None: read it from Chroma), in document order."""

    count: int
    ids: list[str] = field(default_factory=list)
    vectors: list[bytes | None] = field(default_factory=list)


def _memory_ids(tx: Tx, key: int, doc_keys: npt.NDArray[np.int64]) -> dict[int, str]:
    """The memory id of each of user ``key``'s documents ``doc_keys``, by document key."""
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
    return names


def filtered_members(
    tx: Tx, key: int, where: MemoryFilter, known: Collection[str]
) -> FilteredMembers:
    """The memories of user ``key`` meeting ``where``: their count, and (only when more meet
    it than ``known`` holds) the others with the embeddings the index holds of them."""
    doc_keys = filtered_docs(tx, key, where)
    if len(doc_keys) <= len(known):
        return FilteredMembers(len(doc_keys))
    names = _memory_ids(tx, key, doc_keys)
    ids, vectors = _absent_vectors(tx, key, {ident: k for k, ident in names.items()}, known)
    return FilteredMembers(len(doc_keys), ids, vectors)


def document_frequencies(
    tx: Tx, key: int, terms: Sequence[str], cache: PostingsCache | None = None
) -> tuple[int, list[int]]:
    """How many memories user ``key`` has, and how many of them hold each of ``terms``
    (search terms, as ``affect_memory.memory.index.lexical.analyzer.words`` makes them)."""
    totals = _user_totals(tx, key)
    if totals is None or not totals[0] or not terms:
        return (0 if totals is None else int(totals[0] or 0)), [0] * len(terms)
    distinct = list(dict.fromkeys(terms))
    columns = dict(zip(distinct, _postings(tx, key, distinct, totals, cache), strict=True))
    return int(totals[0]), [len(columns[term]) for term in terms]


def search(
    tx: Tx,
    key: int,
    query: str,
    limit: int,
    cache: PostingsCache | None = None,
    known: Collection[str] | None = None,
    *,
    k1: float,
    b: float,
    where: MemoryFilter | None = None,
    rows: dict[str, IndexRow] | None = None,
) -> LexicalHits:
    """The ``limit`` best BM25 matches (``k1``, ``b``) of ``query`` among user ``key``'s
    memories; with ``known``, the embeddings of the hits it lacks too (``LexicalHits.absent``).

    Ties are broken by memory id, so every backend returns the same list. With ``where``,
    only the memories meeting it are ranked. With ``rows``, the hits' whole index rows
    (``read_rows`` with the ranked fields and embeddings) are added to it, read in the same
    statement as their ids.
    """
    nothing = LexicalHits() if known is None else LexicalHits(absent=[])
    terms = query_terms(query)
    if not terms:
        return nothing
    totals = _user_totals(tx, key)
    if totals is None or not totals[0]:
        return nothing
    columns = _postings(tx, key, terms, totals, cache)
    doc_keys, scores = score_terms(columns, int(totals[0]), int(totals[1]), k1=k1, b=b)
    if not len(doc_keys):
        return nothing
    idf_total = sum(idf(int(totals[0]), len(column)) for column in columns)
    if where is not None:
        keep = np.isin(doc_keys, filtered_docs(tx, key, where))
        doc_keys, scores = doc_keys[keep], scores[keep]
        if not len(doc_keys):  # the query's terms are the user's: its share scale stays
            return LexicalHits(absent=None if known is None else [], idf_total=idf_total)
    if len(scores) > limit:
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        keep = scores >= cut  # every memory tied with the last place, for the id tie-break
        doc_keys, scores = doc_keys[keep], scores[keep]
    read: dict[str, IndexRow] = {}
    if rows is None:
        names = _memory_ids(tx, key, doc_keys)
    else:
        read = read_rows(tx, key, doc_keys.tolist(), by_doc_key=True, fields=True, embeddings=True)
        names = {int(row[-1]): ident for ident, row in read.items()}
    ranked = sorted(
        zip(scores.tolist(), (names[int(k)] for k in doc_keys.tolist()), strict=True),
        key=lambda pair: (-pair[0], pair[1]),
    )[:limit]
    ids = [memory_id for _, memory_id in ranked]
    scored = np.asarray([score for score, _ in ranked], dtype=np.float64)
    if rows is not None:
        rows.update((ident, read[ident]) for ident in ids)
    if known is None:
        return LexicalHits(ids, scored, idf_total=idf_total)
    if rows is not None:  # the embeddings came with the rows
        absent = sorted(
            (ident for ident in ids if ident not in known), key=lambda ident: int(read[ident][-1])
        )
        vectors = [_blob(read[ident][10]) for ident in absent]
        return LexicalHits(ids, scored, absent, vectors, idf_total)
    keys = {memory_id: doc_key for doc_key, memory_id in names.items()}
    absent, vectors = _absent_vectors(tx, key, {ident: keys[ident] for ident in ids}, known)
    return LexicalHits(ids, scored, absent, vectors, idf_total)


def _blob(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


@dataclass(frozen=True, slots=True)
class PoolRows:
    """One snapshot's read of a query's pool: the lexical search and the index rows of its
    hits and of the dense candidates (``search_pool``)."""

    hits: LexicalHits
    rows: dict[str, IndexRow]
    """The index rows (``read_rows``, with the ranked fields) of every id asked for that the
    index holds."""
    asked: frozenset[str]
    """The ids whose rows were asked for: the hits, and the dense candidates unless left to
    be read later."""
    embeddings: bool
    """Whether every row carries its embedding."""

    def rehearsal(self, ids: Sequence[str]) -> Rehearsal | None:
        """The rehearsal of ``ids`` with their ranked fields (and embeddings, if read), or
        None when one of them was not asked for."""
        if not self.asked.issuperset(ids):
            return None
        return rehearsal_of(ids, self.rows, fields=True, embeddings=self.embeddings)

    def held(self, ids: Sequence[str]) -> tuple[list[int], Rehearsal]:
        """The positions in ``ids`` of those whose rows were asked for, and their rehearsal."""
        asked = self.asked
        at = [index for index, ident in enumerate(ids) if ident in asked]
        read = [ids[index] for index in at]
        return at, rehearsal_of(read, self.rows, fields=True, embeddings=self.embeddings)


def search_pool(
    tx: Tx,
    key: int,
    query: str,
    limit: int,
    cache: PostingsCache | None,
    known: Sequence[str],
    *,
    k1: float,
    b: float,
    where: MemoryFilter | None = None,
    embeddings: bool = False,
    candidate_rows: bool = True,
) -> PoolRows:
    """``search`` of ``query`` beside the dense candidates ``known``, and the index rows of
    both, in one snapshot: a hit's row comes with its id, and only the candidates the hits
    lack are read by id (with their embeddings if ``embeddings``); without
    ``candidate_rows``, the hits' rows only."""
    rows: dict[str, IndexRow] = {}
    hits = search(tx, key, query, limit, cache, set(known), k1=k1, b=b, where=where, rows=rows)
    if not candidate_rows:
        return PoolRows(hits, rows, frozenset(hits.ids), embeddings)
    rest = [ident for ident in known if ident not in rows]
    rows.update(read_rows(tx, key, rest, fields=True, embeddings=embeddings))
    return PoolRows(hits, rows, frozenset([*known, *hits.ids]), embeddings)
