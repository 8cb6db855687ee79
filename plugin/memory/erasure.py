"""Erasing every trace of one user from a store: their Chroma collection and their index rows.

An erasure runs under the user's index lock as four steps (``ERASE_STEPS``), each idempotent:

1. ``intent``: one index transaction records the erasure (``index_erasures``: the user, their
   collection's name and, for an embedded store, the segment directories Chroma keeps their
   vectors in), so a process killed at any later step leaves a record of what is owed;
2. ``collection``: the user's Chroma collection is deleted (nothing to do if it is gone);
3. ``segments``: an embedded store's segment directories of that collection are removed
   (``delete_collection`` leaves them on disk with the vectors in them);
4. ``index``: one index transaction deletes the user's documents, postings, recall counts,
   journal entries, change log and user row, and the intent with them.

Opening a store finishes every erasure a killed process left (``finish_pending_erasures``),
before anything reads, so a later ``recall``, ``stats`` or ``list`` never shows a half-erased
user; running ``erase_user`` again finishes it too. Only the user's own collection and rows
(keyed by their collection's name) are touched: another user holding the same memory ids is
another collection and another key.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from affect_memory.kernel.errors import shown
from affect_memory.memory.chroma.collections import UserCollections
from affect_memory.memory.index.memory_index import MemoryIndex
from affect_memory.memory.index.storage.backend import Backend, Tx
from affect_memory.memory.index.storage.schema import TABLES
from affect_memory.memory.results import check_user

__all__ = [
    "ERASE_STEPS",
    "USER_TABLES",
    "ErasureReport",
    "drop_collection",
    "erase_user",
    "finish_pending_erasures",
    "record_intent",
    "remove_index_rows",
    "remove_segments",
]

logger = logging.getLogger(__name__)

ERASE_STEPS = ("intent", "collection", "segments", "index")
"""The steps of an erasure, in order (a kill test kills the process after each)."""

USER_TABLES = TABLES
"""Every index table holding rows of a user: all of them, each keyed by ``user_key``."""


@dataclass(frozen=True, slots=True)
class ErasureReport:
    """What erasing one user removed."""

    user_id: str
    memories: int
    """Memories the user's collection held when the erasure started (0 when resumed)."""
    collection_dropped: bool
    """Whether this call deleted the user's Chroma collection (False: it was already gone)."""


def _segment_ids(directory: Path, collection: str) -> list[str]:
    """The ids of the segments an embedded store keeps for ``collection`` (read-only)."""
    database = directory / "chroma.sqlite3"
    if not database.is_file():
        return []
    connection = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT s.id FROM segments s JOIN collections c ON c.id = s.collection "
            "WHERE c.name = ? ORDER BY s.id",
            (collection,),
        ).fetchall()
    finally:
        connection.close()
    return [str(segment_id) for (segment_id,) in rows]


def record_intent(
    backend: Backend, key: int, user_id: str, collection: str, segments: Sequence[str]
) -> None:
    """Step ``intent``: record that ``user_id``'s erasure has started (kept if already there,
    with the segments of both records)."""

    def work(tx: Tx) -> None:
        row = tx.one("SELECT segments FROM index_erasures WHERE user_key = ?", (key,))
        known = [] if row is None else list(json.loads(row[0]))
        merged = json.dumps(sorted({*known, *segments}))
        tx.run(
            "INSERT INTO index_erasures (user_key, user_id, collection, segments) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (user_key) DO UPDATE SET segments = excluded.segments",
            (key, user_id, collection, merged),
        )

    backend.write(work)


def drop_collection(collections: UserCollections, user_id: str) -> bool:
    """Step ``collection``: delete ``user_id``'s Chroma collection; False if it was gone."""
    return collections.drop(user_id)


def remove_segments(collections: UserCollections, segments: Sequence[str]) -> int:
    """Step ``segments``: remove an embedded store's directories of ``segments`` (and any a
    segment repair set aside); how many were removed."""
    directory = collections.location.path if collections.location.kind == "path" else None
    if directory is None:
        return 0
    removed = 0
    for segment_id in segments:
        if not segment_id or "/" in segment_id or segment_id.startswith("."):
            continue  # only ever a bare directory name inside the store
        for found in [directory / segment_id, *directory.glob(f"{segment_id}.damaged-*")]:
            if found.is_dir():
                shutil.rmtree(found)
                removed += 1
    return removed


def remove_index_rows(backend: Backend, key: int) -> None:
    """Step ``index``: delete every index row of the user, the intent included, at once."""

    def work(tx: Tx) -> None:
        for table in USER_TABLES:
            tx.run(f"DELETE FROM {table} WHERE user_key = ?", (key,))

    backend.write(work)


def _pending_segments(backend: Backend, key: int) -> list[str]:
    row = backend.read(
        lambda tx: tx.one("SELECT segments FROM index_erasures WHERE user_key = ?", (key,))
    )
    return [] if row is None else [str(segment) for segment in json.loads(row[0])]


def _finish_locked(
    collections: UserCollections, index: MemoryIndex, user_id: str, key: int
) -> bool:
    """Steps ``collection``, ``segments`` and ``index``; the caller holds the user's lock."""
    dropped = drop_collection(collections, user_id)
    remove_segments(collections, _pending_segments(index.backend, key))
    remove_index_rows(index.backend, key)
    index.forget_user(user_id)
    return dropped


def erase_user(collections: UserCollections, index: MemoryIndex, user_id: str) -> ErasureReport:
    """Erase every memory of ``user_id`` from Chroma and the index (see the module)."""
    user_id = check_user(user_id)
    key, name = index.user_key(user_id)
    with index.backend.lock(name, timeout=index.lock_timeout):
        collection = collections.of(user_id, create=False)
        held = 0
        if collection is not None:
            with collections.backend(f"count the memories of user {shown(user_id)}"):
                held = int(collection.count())
        location = collections.location
        segments = (
            _segment_ids(location.path, name)
            if location.kind == "path" and location.path is not None
            else []
        )
        record_intent(index.backend, key, user_id, name, segments)
        dropped = _finish_locked(collections, index, user_id, key)
    return ErasureReport(user_id=user_id, memories=held, collection_dropped=dropped)


def finish_pending_erasures(collections: UserCollections, index: MemoryIndex) -> list[str]:
    """Finish every erasure a killed process left in this store's prefix (on opening); the
    users finished. A user whose lock a live eraser holds is left to it."""
    pending = index.backend.read(
        lambda tx: tx.rows("SELECT user_id, collection FROM index_erasures ORDER BY user_key")
    )
    finished: list[str] = []
    for user_id, collection in pending:
        key, name = index.user_key(user_id)
        if name != collection:
            continue  # a user of another prefix sharing this index
        with index.backend.try_lock(name) as got:
            if not got:
                continue
            _finish_locked(collections, index, user_id, key)
        logger.warning(
            "finished the erasure of user %s that a stopped process left", shown(user_id)
        )
        finished.append(user_id)
    return finished
