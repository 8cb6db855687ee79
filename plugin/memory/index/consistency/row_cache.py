"""A process's cache of the index rows recall reads, exact at each user's generation.

Every recall reads, for the few hundred members of its pool, what the index holds of each:
recall count, last-recalled time, timestamp, text, significance, valence, episode and
embedding. Read by id, that is a few hundred index lookups per query, most of the hybrid
recall's cost beside Chroma's own search. ``RowCache`` keeps those rows between queries.

It never serves a stale row. Every transaction that changes a document's row (its text, its
fields, its embedding, its recall count, its removal) moves the user's ``generation`` on and
logs the document (``documents.log_changes``), as the postings cache relies on. A read takes
the generation in its snapshot; a cache behind it drops exactly the logged documents, and
one the log cannot bring there (the log was trimmed, the user was erased and made again, a
reset) starts the user over. A read whose snapshot is older than the cache bypasses it. The
embedding of a memory whose write is in flight (a pending journal entry) is masked at every
read, as the uncached read masks it, because the journal moves without a new generation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from affect_memory.memory.index.consistency.documents import ALL_DOCS
from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.index.storage.schema import in_chunks, placeholders

__all__ = [
    "CACHE_ROWS",
    "ROW_COLUMNS",
    "ROW_DOC_KEY",
    "ROW_EMBEDDING",
    "RowCache",
    "in_flight",
]

CACHE_ROWS = 40_000
"""Rows a cache holds at most (about 1.7 KB each with the embedding: about 70 MB); the least
recently read user's rows leave first."""

WHOLE_USER_SHARE = 4
"""A user is read whole on their first read when their rows are at most this fraction (1/4)
of the cache: one scan instead of a few hundred lookups per query while the cache warms."""

ROW_COLUMNS = (
    "d.memory_id, d.recall_count, d.last_recalled_epoch, d.last_recalled_at, d.epoch, "
    "d.doc_text, d.stamp, d.significance, d.valence, d.episode, d.embedding, d.doc_key"
)
"""What a cached row holds, in this order: the rehearsal read's columns, the embedding as
stored (not masked by the journal) and the document key the change log names."""

ROW_EMBEDDING = 10
"""Where a cached row holds the embedding (not masked by the journal)."""

ROW_DOC_KEY = 11
"""Where a cached row holds the document key."""


@dataclass
class _UserRows:
    """One user's cached rows, exact at ``generation``."""

    generation: int
    rows: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    by_doc: dict[int, str] = field(default_factory=dict)
    tried_whole: bool = False
    """Whether the user was read whole (or found too large to be)."""
    complete: bool = False
    """Whether every row of the user is held: an id not held is not in the index."""


class RowCache:
    """Index rows by user and memory id, kept exact by the change log (see the module)."""

    def __init__(self, capacity: int = CACHE_ROWS) -> None:
        """Hold at most ``capacity`` rows."""
        self._capacity = capacity
        self._users: OrderedDict[int, _UserRows] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def rows(self, tx: Tx, key: int, ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """The rows (``ROW_COLUMNS``) of those of ``ids`` the index holds for user ``key``, by
        memory id, as ``tx``'s snapshot holds them; the ones the cache lacks are read in ``tx``."""
        entry, generation = self._ready(tx, key)
        if entry is None or generation is None:
            return {row[0]: row for row in _read(tx, key, ids)} if generation is not None else {}
        with self._lock:
            held = {ident: entry.rows[ident] for ident in ids if ident in entry.rows}
        missing = [ident for ident in dict.fromkeys(ids) if ident not in held]
        fresh = _read(tx, key, missing) if missing and not entry.complete else []
        self._keep(key, entry, generation, fresh)
        held.update((row[0], row) for row in fresh)
        return held

    def docs(self, tx: Tx, key: int, doc_keys: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        """The rows of user ``key``'s documents ``doc_keys``, by document key, as ``rows``
        serves them."""
        entry, generation = self._ready(tx, key)
        if entry is None or generation is None:
            if generation is None:
                return {}
            return {int(row[ROW_DOC_KEY]): row for row in _read_docs(tx, key, doc_keys)}
        with self._lock:
            held = {
                doc_key: entry.rows[entry.by_doc[doc_key]]
                for doc_key in doc_keys
                if doc_key in entry.by_doc
            }
        missing = [doc_key for doc_key in dict.fromkeys(doc_keys) if doc_key not in held]
        fresh = _read_docs(tx, key, missing) if missing and not entry.complete else []
        self._keep(key, entry, generation, fresh)
        held.update((int(row[ROW_DOC_KEY]), row) for row in fresh)
        return held

    def _ready(self, tx: Tx, key: int) -> tuple[_UserRows | None, int | None]:
        """User ``key``'s entry at ``tx``'s generation (read whole on first use when small
        enough) and that generation; no entry for a snapshot older than the cache, and no
        generation for a user the index does not hold."""
        found = tx.one(
            "SELECT generation, doc_count FROM index_users WHERE user_key = ?", (key,)
        )
        if found is None:
            self._forget(key)
            return None, None
        generation, count = int(found[0]), int(found[1] or 0)
        entry = self._current(tx, key, generation)
        if entry is not None and not entry.tried_whole:
            entry.tried_whole = True
            if count * WHOLE_USER_SHARE <= self._capacity:
                entry.complete = self._keep(key, entry, generation, _read(tx, key, None))
        return entry, generation

    def _keep(
        self, key: int, entry: _UserRows, generation: int, fresh: list[tuple[Any, ...]]
    ) -> bool:
        """Add ``fresh`` rows (read at ``generation``) to ``entry`` if it is still current;
        whether every one of them was kept (a full cache keeps no more, and the entry is no
        longer complete)."""
        with self._lock:
            if self._users.get(key) is not entry or entry.generation != generation:
                return False
            if self._size + len(fresh) > self._capacity:
                self._shrink()
            for row in fresh:
                if self._size >= self._capacity:
                    entry.complete = False
                    return False
                if row[0] not in entry.rows:
                    self._size += 1
                entry.rows[row[0]] = row
                entry.by_doc[int(row[ROW_DOC_KEY])] = row[0]
            return True

    def _current(self, tx: Tx, key: int, generation: int) -> _UserRows | None:
        """User ``key``'s entry brought to ``generation`` (a new one if it cannot be); None
        when the cache is already past it."""
        with self._lock:
            entry = self._users.get(key)
            if entry is not None:
                self._users.move_to_end(key)
        if entry is not None and entry.generation > generation:
            return None
        if entry is not None and entry.generation < generation:
            refill = False
            changed = self._changed_since(tx, key, entry.generation, generation)
            with self._lock:
                if self._users.get(key) is not entry or entry.generation > generation:
                    return None  # another read moved it meanwhile
                if changed is None:
                    self._drop(key)
                    entry = None
                else:
                    # incomplete until the changed rows are back, so no read meanwhile takes
                    # a changed row for one the index does not hold
                    refill, entry.complete = entry.complete, False
                    for doc_key in changed:
                        ident = entry.by_doc.pop(doc_key, None)
                        if ident is not None and entry.rows.pop(ident, None) is not None:
                            self._size -= 1
                    entry.generation = generation
            if entry is not None and changed and refill:
                # a complete entry stays so: the changed rows (new, updated or gone) read now
                rows = _read_docs(tx, key, sorted(changed))
                if self._keep(key, entry, generation, rows):
                    with self._lock:
                        entry.complete = entry.generation == generation
        if entry is None:
            with self._lock:
                entry = self._users.get(key)
                if entry is None or entry.generation != generation:
                    self._drop(key)
                    entry = self._users[key] = _UserRows(generation)
                self._shrink()
        return entry

    @staticmethod
    def _changed_since(tx: Tx, key: int, since: int, generation: int) -> set[int] | None:
        """The documents changed after generation ``since`` up to ``generation``; None unless
        the log holds every generation between (and none of them is a reset)."""
        logged = tx.rows(
            "SELECT generation, doc_key FROM index_changes "
            "WHERE user_key = ? AND generation > ? AND generation <= ?",
            (key, since, generation),
        )
        if len({int(row[0]) for row in logged}) != generation - since:
            return None
        changed = {int(row[1]) for row in logged}
        return None if ALL_DOCS in changed else changed

    def _forget(self, key: int) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: int) -> None:
        """Remove user ``key``'s entry (the lock held)."""
        entry = self._users.pop(key, None)
        if entry is not None:
            self._size -= len(entry.rows)

    def _shrink(self) -> None:
        """Drop the least recently read users' rows until a quarter of the room is free (the
        lock held)."""
        while self._size > self._capacity * 3 // 4 and len(self._users) > 1:
            self._drop(next(iter(self._users)))


def _read(tx: Tx, key: int, ids: Sequence[str] | None) -> list[tuple[Any, ...]]:
    """The rows (``ROW_COLUMNS``) of user ``key``'s memories ``ids`` (None: every one)."""
    if ids is None:
        return tx.rows(f"SELECT {ROW_COLUMNS} FROM index_docs d WHERE d.user_key = ?", (key,))
    rows: list[tuple[Any, ...]] = []
    for part in in_chunks(list(ids)):
        rows.extend(
            tx.rows(
                f"SELECT {ROW_COLUMNS} FROM index_docs d "
                f"WHERE d.user_key = ? AND d.memory_id IN ({placeholders(len(part))})",
                (key, *part),
            )
        )
    return rows


def _read_docs(tx: Tx, key: int, doc_keys: Sequence[int]) -> list[tuple[Any, ...]]:
    """The rows (``ROW_COLUMNS``) of user ``key``'s documents ``doc_keys``."""
    rows: list[tuple[Any, ...]] = []
    for part in in_chunks(list(doc_keys)):
        rows.extend(
            tx.rows(
                f"SELECT {ROW_COLUMNS} FROM index_docs d "
                f"WHERE d.user_key = ? AND d.doc_key IN ({placeholders(len(part))})",
                (key, *part),
            )
        )
    return rows


def in_flight(tx: Tx, key: int) -> set[str]:
    """The memories of user ``key`` with a write or forget in flight (a journal entry): their
    embeddings are not served, since their Chroma rows may already be the new ones."""
    return {
        memory_id
        for (memory_id,) in tx.rows(
            "SELECT memory_id FROM index_journal WHERE user_key = ?", (key,)
        )
    }
