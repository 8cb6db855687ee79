"""``MemoryIndex``: a ChromaMemory's side store of lexical postings and rehearsal counts.

Per user it holds what Chroma cannot serve: BM25 over the memories' texts
(``lexical_search``), the authoritative recall counts and last-recalled times
(``rehearsal``, incremented atomically by ``record_recalls``) and the newest memory's time
(``newest_epoch``); ``pool_search`` reads a hybrid query's lexical search and its pool's rows
in one snapshot. Every Chroma write goes through ``writing`` (the journal), except segment
repair's re-upsert of rows as they were, which holds the user's lock and re-reads the rows
(``index_held``); so the index holds exactly the ids and texts Chroma holds, whatever was
killed when.

Before a user's first read in a process, and whenever the journal shows an entry a dead writer
left, the index settles that user against Chroma (if no live writer holds the user's lock;
otherwise that writer will): journal entries first, then a backfill when Chroma holds a
different number of memories (a store written before the index, a migrated collection).

The module is about 490 lines because it is the one object the store talks to: its reads, its writes
and the settling before a user's first read share the per-user state (keys, settled users, the
postings cache) kept here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.chroma.collections import UserCollections
from affect_memory.memory.chroma.layout import user_collection_name
from affect_memory.memory.filters import MemoryFilter
from affect_memory.memory.index.consistency.documents import ensure_user
from affect_memory.memory.index.consistency.journal import entries
from affect_memory.memory.index.consistency.rehearsal import (
    RecallOutcome,
    Rehearsal,
    read_rehearsal,
    record_recalls,
)
from affect_memory.memory.index.consistency.session import WriteSession
from affect_memory.memory.index.consistency.sync import SyncReport, backfill, index_held, reconcile
from affect_memory.memory.index.lexical.search import (
    FilteredMembers,
    LexicalHits,
    PoolRows,
    PostingsCache,
    document_frequencies,
    filtered_members,
    search,
    search_pool,
)
from affect_memory.memory.index.storage.backend import Backend, Tx
from affect_memory.memory.index.storage.schema import user_key
from affect_memory.memory.results import check_ids, check_user
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS

__all__ = ["DEFAULT_LOCK_TIMEOUT", "INDEX_STAGES", "IndexAudit", "MemoryIndex"]

_T = TypeVar("_T")

INDEX_STAGES = ("index_announce", "index_settle")
"""Stages a ``ChromaMemory`` observer sees for each write: the journal transaction before the
Chroma call and the settling one after it, in seconds."""

DEFAULT_LOCK_TIMEOUT = 30.0
"""Seconds a writer waits for another writer of the same user."""

MAX_LEXICAL_LIMIT = 10_000
"""Most hits one lexical search returns."""


@dataclass(frozen=True, slots=True)
class IndexAudit:
    """What the index holds for one user, recounted (for checks against Chroma)."""

    texts: dict[str, str]
    """Memory id -> hash of the indexed text."""
    doc_count: int
    total_length: int
    counted_docs: int
    """Documents counted row by row (equals ``doc_count`` in a consistent index)."""
    counted_length: int
    """Lengths summed row by row (equals ``total_length``)."""
    postings_ok: bool
    """Whether every document's postings sum to its length."""
    pending: int
    """Journal entries not yet settled."""
    ranked: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Memory id -> ``(text, timestamp, significance, valence, episode, epoch)`` as the index
    holds them for ranking (NULL fields as None), to compare with Chroma's row."""
    embeddings: dict[str, bytes | None] = field(default_factory=dict)
    """Memory id -> the embedding the index holds (little-endian float32 bytes, float64 where
    Chroma's values are not float32, or None)."""


class MemoryIndex:
    """The lexical index and rehearsal counts of one store's users, kept in step with Chroma."""

    def __init__(
        self,
        backend: Backend,
        collections: UserCollections,
        prefix: str,
        *,
        chroma_timeout: float,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        observer: Callable[[str, float], None] | None = None,
    ) -> None:
        """Serve ``collections`` (named under ``prefix``) from ``backend``; ``observer`` sees
        each write's ``INDEX_STAGES``."""
        self.backend = backend
        self.collections = collections
        self.chroma_timeout = chroma_timeout
        self.lock_timeout = lock_timeout
        self._prefix = prefix
        self._observer = observer
        self._postings = PostingsCache()
        self._ready: set[str] = set()
        self._keys: dict[str, tuple[int, str]] = {}
        self._guard = threading.Lock()

    @property
    def location(self) -> str:
        """Where the index lives (a SQLite file, ``:memory:`` or a PostgreSQL URL and schema)."""
        return self.backend.describe()

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.backend.kind

    def user_key(self, user_id: str) -> tuple[int, str]:
        """The user's key in the index and the name of their collection (their lock's name)."""
        cached = self._keys.get(user_id)
        if cached is None:
            name = user_collection_name(self._prefix, user_id)
            cached = self._keys[user_id] = (user_key(name), name)
        return cached

    def timed_write(self, stage: str, work: Callable[[Tx], _T]) -> _T:
        """``backend.write(work)``, its duration reported to the observer as ``stage``."""
        if self._observer is None:
            return self.backend.write(work)
        start = time.perf_counter()
        try:
            return self.backend.write(work)
        finally:
            self._observer(stage, time.perf_counter() - start)

    # ---------------------------------------------------------------- settling

    def settle_locked(self, user_id: str, collection: Any, *, recheck: bool = False) -> SyncReport:
        """Bring ``user_id``'s index in line with ``collection``; the caller holds their lock."""
        key, name = self.user_key(user_id)
        fresh = self.backend.write(
            lambda tx: ensure_user(tx, key, name, str(collection.id), user_id)
        )
        now = time.time()
        due = self.backend.read(lambda tx: entries(tx, key, due_by=now))
        report = reconcile(self.backend, self.collections, key, collection, due)
        with self._guard:
            ready = user_id in self._ready and not (fresh or recheck)
        if not ready:
            report += backfill(self.backend, self.collections, key, user_id, collection)
            with self._guard:
                self._ready.add(user_id)
        return report

    def _settle(self, user_id: str, *, wait: bool) -> bool:
        """Settle ``user_id`` if no live writer holds their lock (``wait``: wait for it)."""
        collection = self.collections.of(user_id, create=False)
        _, name = self.user_key(user_id)
        if wait:
            with self.backend.lock(name, timeout=self.lock_timeout):
                self._settle_held(user_id, collection)
            return True
        with self.backend.try_lock(name) as got:
            if got:
                self._settle_held(user_id, collection)
            return got

    def _settle_held(self, user_id: str, collection: Any) -> None:
        if collection is not None:
            self.settle_locked(user_id, collection)
            return
        key, _ = self.user_key(user_id)
        backfill(self.backend, self.collections, key, user_id, None)  # drop leftovers
        with self._guard:
            self._ready.add(user_id)

    def _read(self, user_id: str, work: Callable[[Tx, int], _T]) -> _T:
        """``work`` on a settled view of ``user_id``'s index, in one snapshot."""
        if user_id not in self._ready:
            self._settle(user_id, wait=False)
        key, _ = self.user_key(user_id)
        now = time.time()

        def attempt(tx: Tx) -> tuple[_T, bool]:
            due = tx.one(
                "SELECT 1 FROM index_journal WHERE user_key = ? AND due <= ? LIMIT 1", (key, now)
            )
            return work(tx, key), due is not None

        result, pending = self.backend.read(attempt)
        if pending and self._settle(user_id, wait=False):
            result = self.backend.read(lambda tx: work(tx, key))
        return result

    def reconcile_pending(self) -> SyncReport:
        """Settle every user whose journal holds entries a dead writer left (on opening)."""
        now = time.time()
        users = self.backend.read(
            lambda tx: tx.rows(
                "SELECT DISTINCT u.user_id, u.collection FROM index_journal j "
                "JOIN index_users u ON u.user_key = j.user_key WHERE j.due <= ?",
                (now,),
            )
        )
        report = SyncReport()
        for user_id, collection_name in users:
            if collection_name != self.user_key(user_id)[1]:
                continue  # a user of another prefix sharing this index
            collection = self.collections.of(user_id, create=False)
            _, name = self.user_key(user_id)
            with self.backend.try_lock(name) as got:
                if got and collection is not None:
                    report += self._reconcile_due(user_id, collection, now)
        return report

    def _reconcile_due(self, user_id: str, collection: Any, now: float) -> SyncReport:
        key, _ = self.user_key(user_id)
        due = self.backend.read(lambda tx: entries(tx, key, due_by=now))
        return reconcile(self.backend, self.collections, key, collection, due)

    def sync(self, user_id: str | None = None) -> SyncReport:
        """Settle one user, or every user the store holds, against Chroma now (waiting for
        their writers); counts are compared again even for users this process settled."""
        users = [check_user(user_id)] if user_id is not None else [
            owner for owner, _ in self.collections.every()
        ]
        report = SyncReport()
        for owner in users:
            collection = self.collections.of(owner, create=False)
            _, name = self.user_key(owner)
            with self.backend.lock(name, timeout=self.lock_timeout):
                if collection is None:
                    key, _ = self.user_key(owner)
                    report += backfill(self.backend, self.collections, key, owner, None)
                else:
                    report += self.settle_locked(owner, collection, recheck=True)
        return report

    # ---------------------------------------------------------------- reads

    def lexical_search(
        self,
        user_id: str,
        query: str,
        limit: int,
        *,
        known: Collection[str] | None = None,
        k1: float = DEFAULT_RECALL_SETTINGS.bm25_k1,
        b: float = DEFAULT_RECALL_SETTINGS.bm25_b,
        where: MemoryFilter | None = None,
    ) -> LexicalHits:
        """``user_id``'s memories best matching ``query`` by BM25 (``k1``, ``b``: the recall
        settings'), best first, at most ``limit``; empty when the query has no searchable
        term. With ``known`` (ids the caller has), the embeddings the index holds of the other
        hits too, read in the same snapshot (``LexicalHits.absent`` and ``vectors``). With
        ``where``, only the memories whose filter tags meet it (``memory.filters``)."""
        user_id = check_user(user_id)
        self._check_search(query, limit)
        return self._read(
            user_id,
            lambda tx, key: search(
                tx, key, query, limit, self._postings, known, k1=k1, b=b, where=where
            ),
        )

    @staticmethod
    def _check_search(query: object, limit: object) -> None:
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {shown(query)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= (
            MAX_LEXICAL_LIMIT
        ):
            raise InvalidInputError(
                f"limit must be an integer in [1, {MAX_LEXICAL_LIMIT:,}], got {shown(limit)}"
            )

    def pool_search(
        self,
        user_id: str,
        query: str,
        limit: int,
        *,
        known: Sequence[str],
        k1: float = DEFAULT_RECALL_SETTINGS.bm25_k1,
        b: float = DEFAULT_RECALL_SETTINGS.bm25_b,
        where: MemoryFilter | None = None,
        embeddings: bool = False,
        candidate_rows: bool = True,
    ) -> PoolRows:
        """``lexical_search`` beside a query's dense candidates ``known``, and the index rows
        of the hits and (with ``candidate_rows``) the candidates (counts, ranked fields, and
        with ``embeddings`` their embeddings), in one snapshot: what recall reads of a hybrid
        query's pool."""
        user_id = check_user(user_id)
        self._check_search(query, limit)
        wanted = list(known)

        def work(tx: Tx, key: int) -> PoolRows:
            return search_pool(
                tx, key, query, limit, self._postings, wanted, k1=k1, b=b, where=where,
                embeddings=embeddings, candidate_rows=candidate_rows,
            )  # fmt: skip

        return self._read(user_id, work)

    def filtered_members(
        self, user_id: str, where: MemoryFilter, known: Collection[str]
    ) -> FilteredMembers:
        """How many of ``user_id``'s memories meet ``where`` and, when that is more than
        ``known`` (ids the caller has), the others with the embeddings the index holds."""
        user_id = check_user(user_id)
        return self._read(user_id, lambda tx, key: filtered_members(tx, key, where, known))

    def document_frequencies(self, user_id: str, terms: Sequence[str]) -> tuple[int, list[int]]:
        """How many memories ``user_id`` has, and how many of them hold each search term."""
        user_id = check_user(user_id)
        wanted = list(terms)
        return self._read(
            user_id, lambda tx, key: document_frequencies(tx, key, wanted, self._postings)
        )

    def rehearsal(
        self, user_id: str, ids: Sequence[str], *, fields: bool = False, embeddings: bool = False
    ) -> Rehearsal:
        """The authoritative recall counts and last-recalled epochs of ``ids``, aligned; with
        ``fields``, what ranking reads of their Chroma rows too (``Rehearsal.ranked``), and
        with ``embeddings`` (and ``fields``) their embeddings as well, None while one's write
        is in flight."""
        user_id = check_user(user_id)
        wanted = list(ids)
        options = {"fields": fields, "embeddings": embeddings}
        if not wanted:
            return self.backend.read(lambda tx: read_rehearsal(tx, 0, [], **options))
        return self._read(user_id, lambda tx, key: read_rehearsal(tx, key, wanted, **options))

    def newest_epoch(self, user_id: str) -> float | None:
        """The timestamp epoch of ``user_id``'s newest memory, or None if they have none."""
        user_id = check_user(user_id)

        def newest(tx: Tx, key: int) -> float | None:
            row = tx.one("SELECT MAX(epoch) FROM index_docs WHERE user_key = ?", (key,))
            return None if row is None or row[0] is None else float(row[0])

        return self._read(user_id, newest)

    def memory_count(self, user_id: str) -> int:
        """How many memories the index holds of ``user_id`` (0 for a user it does not know)."""
        user_id = check_user(user_id)

        def count(tx: Tx, key: int) -> int:
            row = tx.one("SELECT doc_count FROM index_users WHERE user_key = ?", (key,))
            return 0 if row is None else int(row[0])

        return self._read(user_id, count)

    def ordered_ids(self, user_id: str, *, limit: int, offset: int) -> list[str]:
        """A page of ``user_id``'s memory ids, oldest timestamp first, then by id (a memory
        without a timestamp epoch last)."""
        user_id = check_user(user_id)

        def page(tx: Tx, key: int) -> list[str]:
            return [
                str(memory_id)
                for (memory_id,) in tx.rows(
                    "SELECT memory_id FROM index_docs WHERE user_key = ? "
                    "ORDER BY (epoch IS NULL), epoch, memory_id LIMIT ? OFFSET ?",
                    (key, limit, offset),
                )
            ]

        return self._read(user_id, page)

    def forget_user(self, user_id: str) -> None:
        """Forget what this process knows of ``user_id``'s index (after their erasure)."""
        with self._guard:
            self._ready.discard(user_id)

    def audit(self, user_id: str) -> IndexAudit:
        """What the index holds for ``user_id``, with its totals recounted."""
        user_id = check_user(user_id)
        key, _ = self.user_key(user_id)

        def work(tx: Tx) -> IndexAudit:
            texts: dict[str, str] = {}
            ranked: dict[str, tuple[Any, ...]] = {}
            embeddings: dict[str, bytes | None] = {}
            for memory_id, digest, blob, *fields in tx.rows(
                "SELECT memory_id, text_hash, embedding, doc_text, stamp, significance, valence, "
                "episode, epoch FROM index_docs WHERE user_key = ?",
                (key,),
            ):
                texts[memory_id] = digest
                embeddings[memory_id] = None if blob is None else bytes(blob)
                if fields[4] is not None:
                    fields[4] = fields[4] == 1
                ranked[memory_id] = tuple(fields)
            totals = tx.one(
                "SELECT doc_count, total_length FROM index_users WHERE user_key = ?", (key,)
            ) or (0, 0)
            counted = tx.one(
                "SELECT COUNT(*), COALESCE(SUM(length), 0) FROM index_docs WHERE user_key = ?",
                (key,),
            ) or (0, 0)
            mismatched = tx.one(
                "SELECT COUNT(*) FROM index_docs d WHERE d.user_key = ? AND d.length <> "
                "(SELECT COALESCE(SUM(p.tf), 0) FROM index_postings p "
                "WHERE p.user_key = d.user_key AND p.doc_key = d.doc_key)",
                (key,),
            ) or (0,)
            pending = tx.one("SELECT COUNT(*) FROM index_journal WHERE user_key = ?", (key,))
            return IndexAudit(
                texts=texts,
                doc_count=int(totals[0]),
                total_length=int(totals[1]),
                counted_docs=int(counted[0]),
                counted_length=int(counted[1]),
                postings_ok=int(mismatched[0]) == 0,
                pending=int(pending[0]) if pending else 0,
                ranked=ranked,
                embeddings=embeddings,
            )

        return self.backend.read(work)

    # ---------------------------------------------------------------- writes

    def writing(self, user_id: str, collection: Any) -> WriteSession:
        """A write session for ``user_id``'s existing ``collection`` (use it as ``with``)."""
        return WriteSession(self, user_id, collection)

    def record_recalls(
        self, user_id: str, turn_id: str, ids: Iterable[str], *, epoch: float, iso: str
    ) -> RecallOutcome:
        """Count turn ``turn_id``'s recall of ``ids`` once per memory, atomically.

        An id the index lacks is counted once the index holds it: the call waits for the
        user's writers and indexes what Chroma holds, so an add another worker has made but
        not yet settled (or died settling) loses no recall. An id is reported missing when
        Chroma lacks it too, or while a write or forget of it waits for its due time.
        """
        user_id = check_user(user_id)
        wanted = check_ids(ids, "recalled_ids")
        if "\x00" in turn_id:
            raise InvalidInputError(f"turn_id must not contain NUL characters: {shown(turn_id)}")
        if user_id not in self._ready:
            self._settle(user_id, wait=True)  # a pre-index store is indexed before counting
        key, name = self.user_key(user_id)

        def count(ids: list[str]) -> RecallOutcome:
            return self.backend.write(
                lambda tx: record_recalls(tx, key, turn_id, ids, epoch=epoch, iso=iso)
            )

        outcome = count(wanted)
        if not outcome.missing:
            return outcome
        collection = self.collections.of(user_id, create=False)
        if collection is None:
            return outcome
        # The turn surfaced memories the index lacks: most likely added to Chroma by a writer
        # that has not settled them yet (live: wait for its lock; killed: settle its entries).
        # Counting them only once they are indexed keeps the add's own counts from replacing
        # this increment.
        with self.backend.lock(name, timeout=self.lock_timeout):
            self.settle_locked(user_id, collection)
            later = count(list(outcome.missing))
            if later.missing:
                index_held(self.backend, self.collections, key, collection, later.missing)
                last = count(list(later.missing))
                later = RecallOutcome(
                    (*later.incremented, *last.incremented),
                    (*later.already, *last.already),
                    last.missing,
                )
        incremented = {*outcome.incremented, *later.incremented}
        already = {*outcome.already, *later.already}
        return RecallOutcome(
            incremented=tuple(ident for ident in wanted if ident in incremented),
            already=tuple(ident for ident in wanted if ident in already),
            missing=tuple(ident for ident in wanted if ident in later.missing),
        )

    def close(self) -> None:
        """Release the index's connections; safe to call twice."""
        self.backend.close()
