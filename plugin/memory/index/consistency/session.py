"""A write session: one user's lock held while their memories change in Chroma and the index.

``MemoryIndex.writing`` opens one around every Chroma write of a user (``BatchWriter``'s
add and upsert and their undo, ``forget``; segment repair re-upserts rows as they were under
the user's lock alone, then re-reads them). On entry it takes the user's lock and settles
whatever an earlier writer left (journal entries, a missing backfill); each change is then
announced, made in Chroma by the caller, and settled
(``affect_memory.memory.index.consistency.journal``). If the block fails between an announcement
and its settlement, the exit reconciles the open entries against Chroma at once, or, when Chroma's
answer may still change (Chroma unavailable or timed out: the call may land later), leaves them
for the Chroma timeout plus ``AMBIGUOUS_GRACE`` seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from affect_memory.errors import StoreUnavailableError
from affect_memory.kernel.errors import shown
from affect_memory.memory.index.consistency.documents import doc_from_record, put_docs, remove_docs
from affect_memory.memory.index.consistency.journal import (
    AMBIGUOUS_GRACE,
    Entry,
    announce,
    defer,
    entries,
    settle,
    write_intent,
)
from affect_memory.memory.index.consistency.sync import Counts, reconcile, stored_rows
from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.records import MemoryRecord

if TYPE_CHECKING:
    from affect_memory.memory.index.memory_index import MemoryIndex

__all__ = ["WriteSession"]

logger = logging.getLogger(__name__)


class WriteSession:
    """One user's writes, announced, made in Chroma by the caller, then settled."""

    def __init__(self, index: MemoryIndex, user_id: str, collection: Any) -> None:
        """A session for ``user_id``'s ``collection`` (which must exist)."""
        self._index = index
        self._user_id = user_id
        self._collection = collection
        self._key, self._name = index.user_key(user_id)
        self._open: dict[str, Entry] = {}
        self._lock: Any = None

    def __enter__(self) -> WriteSession:
        lock = self._index.backend.lock(self._name, timeout=self._index.lock_timeout)
        lock.__enter__()
        self._lock = lock
        try:
            self._index.settle_locked(self._user_id, self._collection)
        except BaseException as error:
            lock.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._open:
                self._close_open(exc)
        finally:
            self._lock.__exit__(exc_type, exc, traceback)

    def _close_open(self, error: BaseException | None) -> None:
        """Entries a failed block left open: reconciled now, or later if Chroma may yet change."""
        open_entries = list(self._open.values())
        self._open.clear()
        backend = self._index.backend
        if isinstance(error, StoreUnavailableError):
            due = time.time() + self._index.chroma_timeout + AMBIGUOUS_GRACE
            ids = [entry.memory_id for entry in open_entries]
            try:
                backend.write(lambda tx: defer(tx, self._key, ids, due=due))
            except Exception as failure:
                _warn_in_one_line(failure, "could not defer %d journal entries", len(ids))
            return
        try:
            reconcile(backend, self._index.collections, self._key, self._collection, open_entries)
        except Exception as failure:
            _warn_in_one_line(
                failure,
                "could not reconcile %d journal entries of user %s now; they stay pending",
                len(open_entries),
                shown(self._user_id),
            )

    def _announce(self, op: Any, items: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        self._index.timed_write(
            "index_announce", lambda tx: announce(tx, self._key, op, items, due=0.0)
        )
        for memory_id, intent in items:
            self._open[memory_id] = Entry(memory_id, op, intent)

    def announce_writes(self, records: Sequence[MemoryRecord]) -> None:
        """Announce that ``records`` are about to be written to Chroma."""
        self._announce("write", [(record.id, write_intent(record)) for record in records])

    def settle_writes(self, records: Sequence[MemoryRecord]) -> None:
        """Chroma holds ``records`` now: index them (their counts replace the index's)."""
        ids = [record.id for record in records]
        stored = self._read_back(ids)
        docs = [doc_from_record(record, *stored.get(record.id, (None, None))) for record in records]

        def work(tx: Tx) -> None:
            put_docs(tx, self._key, docs)
            settle(tx, self._key, ids)

        self._index.timed_write("index_settle", work)
        self._closed(ids)

    def _read_back(self, ids: Sequence[str]) -> dict[str, tuple[Mapping[str, Any], Any]]:
        """Chroma's metadata and embedding of the rows just written (empty if they cannot be
        read now)."""
        try:
            rows = stored_rows(
                self._index.collections, self._collection, ids, "read back the memories written"
            )
        except Exception:
            logger.warning(
                "could not read back %d memories of user %s just written; recall reads them "
                "from Chroma until they are written again",
                len(ids),
                shown(self._user_id),
                exc_info=True,
            )
            return {}
        return {
            ident: (meta, vector) for ident, (_, meta, vector) in rows.items() if meta is not None
        }

    def announce_forget(self, ids: Sequence[str]) -> None:
        """Announce that ``ids`` are about to be deleted from Chroma."""
        self._announce("forget", [(ident, {}) for ident in ids])

    def settle_forget(self, ids: Sequence[str]) -> None:
        """Chroma no longer holds ``ids``: remove them from the index."""

        def work(tx: Tx) -> None:
            remove_docs(tx, self._key, ids)
            settle(tx, self._key, ids)

        self._index.timed_write("index_settle", work)
        self._closed(ids)

    def announce_resync(self, ids: Sequence[str]) -> None:
        """Announce that ``ids`` are about to change in Chroma in a way only Chroma can tell
        (an undo)."""
        self._announce("resync", [(ident, {}) for ident in ids])

    def resync(self, ids: Sequence[str], *, counts: Mapping[str, Counts] | None = None) -> None:
        """Make the index mirror what Chroma now holds for ``ids``; ``counts`` replace the
        index's where given (an undo putting rows back)."""
        wanted = [self._open.get(ident) or Entry(ident, "resync", {}) for ident in ids]
        reconcile(
            self._index.backend,
            self._index.collections,
            self._key,
            self._collection,
            wanted,
            counts=counts,
        )
        self._closed(ids)

    def _closed(self, ids: Sequence[str]) -> None:
        for ident in ids:
            self._open.pop(ident, None)

    def pending(self) -> list[Entry]:
        """This user's journal entries (for checks)."""
        return self._index.backend.read(lambda tx: entries(tx, self._key))

    def counts(self, ids: Sequence[str]) -> dict[str, Counts]:
        """The index's counts of those ``ids`` it holds (read under the session's lock)."""
        from affect_memory.memory.index.consistency.rehearsal import read_rehearsal

        wanted = list(ids)
        if not wanted:
            return {}
        rehearsal = self._index.backend.read(lambda tx: read_rehearsal(tx, self._key, wanted))
        return {
            ident: (int(count), None if stamp is None else float(epoch), stamp)
            for ident, count, epoch, stamp, held in zip(
                rehearsal.ids,
                rehearsal.recall_counts.tolist(),
                rehearsal.last_recalled.tolist(),
                rehearsal.last_recalled_at,
                rehearsal.found.tolist(),
                strict=True,
            )
            if held
        }


def _warn_in_one_line(failure: BaseException, message: str, *args: object) -> None:
    """Log ``message`` and the failure as one warning line; its traceback only at DEBUG (a
    failed reconcile is expected to retry later, and 45 lines of it buried the log)."""
    reason = " ".join(f"{type(failure).__name__}: {failure}".split())
    logger.warning(message + " (%s)", *args, reason)
    logger.debug("the traceback of: " + message, *args, exc_info=failure)
