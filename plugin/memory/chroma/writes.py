"""Batch writes into the users' collections: embedded and written in chunks, undone on failure.

``add`` skips the ids a record's user already has; ``upsert`` replaces them, keeping the rows
it replaces so that a failure can put them back. If a write fails part way (Chroma refuses a
chunk, the server times out), what the call had sent is taken back before the error is
raised, so a failed call leaves nothing of itself. A process killed mid-write cannot undo: it
leaves a prefix of the batch, which re-running the same call completes.

Every user's part runs in a write session of the memory index (``affect_memory.memory.index``): the
user's lock is held from the check of which ids exist to the last chunk, and each chunk is
announced in the index's journal before Chroma is written and settled after, so the index
holds exactly what Chroma holds however the process ends. ``forget`` goes the same way.

While a chunk is announced, written and settled, the next one is embedded in a helper thread
(``affect_memory.models.ahead``): the next chunk of the same user, or the first one of the next
user (an upsert's first records, an add's when none of them is stored yet, looked up without
the lock and checked again under it). The helper only embeds; every read and write of Chroma
and the index stays in the calling thread, in the order above, and a failure stops the helper
and waits for it before the call raises. ``$AFFECT_MEMORY_EMBED_AHEAD=0`` (or
``BatchWriter(embed_ahead=False)``) embeds each chunk just before its write instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from affect_memory.errors import EmbeddingError, StoreError
from affect_memory.memory.chroma.collections import UserCollections
from affect_memory.memory.chroma.rows import StoredRow, ids_of, snapshots_of
from affect_memory.memory.index.consistency.session import WriteSession
from affect_memory.memory.index.consistency.sync import Counts
from affect_memory.memory.index.memory_index import MemoryIndex
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import WriteReport
from affect_memory.models.ahead import EmbedAhead
from affect_memory.models.embeddings import Embedder

__all__ = [
    "EMBED_AHEAD_ENV",
    "PROGRESS_MIN",
    "WRITE_CHUNK",
    "BatchWriter",
    "WritePlan",
    "by_user",
    "chunks",
]

PROGRESS_MIN = 200
"""Smallest write that shows a progress bar."""

WRITE_CHUNK = 512
"""Most records embedded and written per Chroma call."""

EMBED_AHEAD_ENV = "AFFECT_MEMORY_EMBED_AHEAD"
"""Environment variable: ``0`` turns off embedding the next chunk while one is written."""


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class WritePlan:
    """One user's part of a write: the collection and the records to write into it."""

    user_id: str
    collection: Any
    records: list[MemoryRecord]
    previous: dict[str, StoredRow] = field(default_factory=dict)
    """For upsert: the rows the write replaces, by id."""
    previous_counts: dict[str, Counts] = field(default_factory=dict)
    """For upsert: the index's counts of the rows it replaces, to put back with them."""
    skipped: list[str] = field(default_factory=list)
    """For add: ids the user already had, left untouched."""
    attempted: list[str] = field(default_factory=list)
    """Ids handed to Chroma so far (a failed call may have stored some of them)."""


def by_user(records: Sequence[MemoryRecord]) -> dict[str, list[MemoryRecord]]:
    """Records grouped by owner, in first-seen order."""
    groups: dict[str, list[MemoryRecord]] = {}
    for record in records:
        groups.setdefault(record.user_id, []).append(record)
    return groups


class BatchWriter:
    """Writes validated batches into the collections of one store with one embedder."""

    def __init__(
        self,
        collections: UserCollections,
        embedder: Embedder,
        index: MemoryIndex,
        *,
        progress: bool | None,
        embed_ahead: bool | None = None,
    ) -> None:
        """Write through ``collections`` and ``index``; ``progress`` is the default for a bar
        (None: a TTY); ``embed_ahead`` (None: unless ``$AFFECT_MEMORY_EMBED_AHEAD`` is 0)
        embeds the next chunk while one is written."""
        self._collections = collections
        self._embedder = embedder
        self._index = index
        self._progress = progress
        if embed_ahead is None:
            embed_ahead = os.environ.get(EMBED_AHEAD_ENV, "").strip() != "0"
        self.embed_ahead = embed_ahead

    def add(self, batch: Sequence[MemoryRecord], *, progress: bool | None) -> WriteReport:
        """Store new records; ids the record's user already has are left alone and reported."""
        plans = [WritePlan(user_id, None, group) for user_id, group in by_user(batch).items()]
        self.write(plans, replace=False, progress=progress)
        stored = {(plan.user_id, ident) for plan in plans for ident in plan.skipped}
        return WriteReport(
            written=sum(len(plan.records) for plan in plans),
            skipped=tuple(r.id for r in batch if (r.user_id, r.id) in stored),
        )

    def upsert(self, batch: Sequence[MemoryRecord], *, progress: bool | None) -> WriteReport:
        """Store records, replacing the record's user's memories under the same ids."""
        plans = [WritePlan(user_id, None, group) for user_id, group in by_user(batch).items()]
        self.write(plans, replace=True, progress=progress)
        return WriteReport(written=len(batch))

    def forget(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """Delete ``user_id``'s memories ``ids`` from Chroma and the index; the ids removed."""
        collection = self._collections.of(user_id, create=False)
        if collection is None or not ids:
            return []
        with self._index.writing(user_id, collection) as session:
            present = self.existing(collection, ids)
            removed = [ident for ident in ids if ident in present]
            if removed:
                session.announce_forget(removed)
                with self._collections.backend("forget memories"):
                    for chunk in chunks(removed, self._collections.max_batch):
                        collection.delete(ids=list(chunk))
                session.settle_forget(removed)
        return removed

    def existing(self, collection: Any | None, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the collection already holds."""
        found: set[str] = set()
        if collection is None:
            return found
        with self._collections.backend("look up ids"):
            for chunk in chunks(ids, self._collections.max_batch):
                found.update(ids_of(collection.get(ids=list(chunk), include=[])))
        return found

    def snapshot(self, collection: Any, ids: Sequence[str]) -> dict[str, StoredRow]:
        """The stored rows of ``ids`` as they are, to undo an upsert."""
        rows: dict[str, StoredRow] = {}
        with self._collections.backend("read the rows an upsert replaces"):
            for chunk in chunks(ids, self._collections.max_batch):
                rows.update(
                    snapshots_of(
                        collection.get(
                            ids=list(chunk), include=["documents", "metadatas", "embeddings"]
                        )
                    )
                )
        return rows

    def _show_progress(self, total: int, asked: bool | None) -> bool:
        wanted = asked if asked is not None else self._progress
        if wanted is None:
            wanted = sys.stderr.isatty()
        return bool(wanted) and total >= PROGRESS_MIN

    def _prepare(self, plan: WritePlan, session: WriteSession, *, replace: bool) -> None:
        """Under the user's lock: what the plan replaces (upsert) or skips (add)."""
        ids = [record.id for record in plan.records]
        if replace:
            plan.previous = self.snapshot(plan.collection, ids)
            plan.previous_counts = session.counts(list(plan.previous))
            return
        existing = self.existing(plan.collection, ids)
        plan.skipped = [ident for ident in ids if ident in existing]
        plan.records = [record for record in plan.records if record.id not in existing]

    def _next_texts(
        self,
        parts: Sequence[Sequence[MemoryRecord]],
        number: int,
        later: Sequence[WritePlan],
        size: int,
        replace: bool,
    ) -> list[str]:
        """The texts written after chunk ``number`` of ``parts``: the plan's next chunk, else
        the first chunk (of ``size``) of the next plan, ``later``, where it is known already."""
        if number + 1 < len(parts):
            following: Sequence[MemoryRecord] = parts[number + 1]
        elif later:
            following = self._first_chunk(later[0], size, replace=replace)
        else:
            following = []
        return [record.text for record in following]

    def _first_chunk(self, plan: WritePlan, size: int, *, replace: bool) -> list[MemoryRecord]:
        """The chunk ``plan`` will write first, where it is known before its lock is held: an
        upsert's first records; an add's when none of them (or, for a plan of one chunk, which
        of them) is stored yet. Empty when unknown; ``_prepare`` decides under the lock."""
        first = plan.records[:size]
        if replace or not first:
            return first
        collection = plan.collection
        if collection is None:
            collection = self._collections.of(plan.user_id, create=False)
            if collection is None:  # created by the write: nothing of it is stored yet
                return first
            plan.collection = collection
        existing = self.existing(collection, [record.id for record in first])
        if not existing:
            return first
        if len(plan.records) > size:
            return []
        return [record for record in first if record.id not in existing]

    def write(self, plans: Sequence[WritePlan], *, replace: bool, progress: bool | None) -> None:
        """Embed and write every plan in chunks; on any failure undo the call, then raise."""
        total = sum(len(plan.records) for plan in plans)
        if not total:
            return
        from tqdm import tqdm

        chunk_size = min(self._collections.max_batch, WRITE_CHUNK)
        bar = tqdm(
            total=total,
            unit="memory",
            desc="ingest",
            disable=not self._show_progress(total, progress),
            file=sys.stderr,
        )
        action = "upsert" if replace else "add"
        ahead = EmbedAhead(self._embedder, enabled=self.embed_ahead)
        try:
            with bar:
                for at, plan in enumerate(plans):
                    if plan.collection is None:
                        plan.collection = self._collections.of(plan.user_id, create=True)
                    with self._index.writing(plan.user_id, plan.collection) as session:
                        self._prepare(plan, session, replace=replace)
                        bar.update(len(plan.skipped))
                        write = plan.collection.upsert if replace else plan.collection.add
                        parts = list(chunks(plan.records, chunk_size))
                        for number, chunk in enumerate(parts):
                            texts = [record.text for record in chunk]
                            vectors = ahead.take(texts)
                            if ahead.enabled:
                                later = plans[at + 1 : at + 2]
                                ahead.start(
                                    self._next_texts(parts, number, later, chunk_size, replace)
                                )
                            ids = [record.id for record in chunk]
                            session.announce_writes(chunk)
                            plan.attempted.extend(ids)
                            with self._collections.backend("write memories"):
                                write(
                                    ids=ids,
                                    embeddings=vectors,
                                    documents=texts,
                                    metadatas=[record.to_metadata() for record in chunk],
                                )
                            session.settle_writes(chunk)
                            bar.update(len(chunk))
        except BaseException as error:
            ahead.stop()  # nothing embedded ahead is written; close() below waits for it
            attempted = sum(len(plan.attempted) for plan in plans)
            try:
                self._undo(plans)
            except BaseException as undo_error:
                raise StoreError(
                    f"{action} failed ({error}) and undoing it failed too ({undo_error}): up to "
                    f"{attempted:,} of its records may be stored; run the same {action} again "
                    "to complete it"
                ) from error
            if isinstance(error, StoreError | EmbeddingError) and attempted:
                raise type(error)(
                    f"{error}; nothing of this {action} was kept (the {attempted:,} records it "
                    "had sent were taken back)"
                ) from error
            raise
        finally:
            ahead.close()

    def _undo(self, plans: Sequence[WritePlan]) -> None:
        """Take back what ``write`` sent: delete added ids, put replaced rows back (and their
        counts in the index)."""
        for plan in plans:
            if not plan.attempted or plan.collection is None:
                continue
            added = [ident for ident in plan.attempted if ident not in plan.previous]
            replaced = [ident for ident in plan.attempted if ident in plan.previous]
            with self._index.writing(plan.user_id, plan.collection) as session:
                session.announce_resync(plan.attempted)
                with self._collections.backend("undo a failed write"):
                    for part in chunks(added, self._collections.max_batch):
                        plan.collection.delete(ids=list(part))
                    for part in chunks(replaced, self._collections.max_batch):
                        rows = [plan.previous[ident] for ident in part]
                        plan.collection.upsert(
                            ids=list(part),
                            documents=[text for text, _, _ in rows],
                            metadatas=[meta for _, meta, _ in rows],
                            embeddings=np.asarray(
                                [vector for _, _, vector in rows], dtype=np.float32
                            ),
                        )
                session.resync(plan.attempted, counts=plan.previous_counts)
