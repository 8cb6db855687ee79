"""Bringing one user's index in line with their Chroma collection: reconcile and backfill.

Both run under the user's lock (``affect_memory.memory.index.storage.backend``), so no writer of
that user is between its journal and Chroma meanwhile.

* ``reconcile`` settles journal entries a killed (or failed) writer left: per id, Chroma's
  row decides (see ``affect_memory.memory.index.consistency.journal``).
* ``backfill`` indexes what Chroma holds and the index lacks: a store written before the
  index existed, a collection migrated or adopted from elsewhere, rows written by another
  tool. It compares counts first (one call each), and only when they differ (or the user was
  indexed with another analyzer, or before the index held ranking's fields) pages through the
  collection, ``PAGE`` rows per call and
  transaction, and removes what Chroma no longer holds. Counts the index already keeps stay;
  new rows start from the counts Chroma recorded (a pre-index store's). A backfill cut short
  leaves a subset of the collection indexed, which the next one completes.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from affect_memory.kernel.errors import shown
from affect_memory.memory.chroma.collections import UserCollections
from affect_memory.memory.index.consistency.documents import (
    IndexedDoc,
    doc_from_stored,
    put_docs,
    remove_docs,
    remove_user_docs,
)
from affect_memory.memory.index.consistency.journal import Entry, matches, settle
from affect_memory.memory.index.consistency.journal import entries as journal_entries
from affect_memory.memory.index.lexical.analyzer import ANALYZER
from affect_memory.memory.index.storage.backend import Backend, Tx
from affect_memory.memory.index.storage.schema import FIELDS_LEVEL
from affect_memory.memory.timestamps import normalize_timestamp

__all__ = ["PAGE", "Counts", "SyncReport", "backfill", "index_held", "reconcile", "stored_rows"]

logger = logging.getLogger(__name__)

PAGE = 1000
"""Rows read from Chroma per call while backfilling (Chroma refuses a get of more than
32,766 rows with metadata)."""

_PROGRESS_MIN = 2000

Counts = tuple[int, float | None, str | None]
"""A memory's recall count, last-recalled epoch and last-recalled ISO time."""


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What bringing a user's index in line with Chroma changed."""

    indexed: int = 0
    """Memories added to the index or re-indexed."""
    removed: int = 0
    """Memories removed from the index (Chroma does not hold them)."""
    reconciled: int = 0
    """Journal entries settled."""

    def __add__(self, other: SyncReport) -> SyncReport:
        return SyncReport(
            self.indexed + other.indexed,
            self.removed + other.removed,
            self.reconciled + other.reconciled,
        )


StoredRow = tuple[object, Mapping[str, Any] | None, object]
"""A row as Chroma returned it: its document, metadata and embedding."""


def stored_rows(
    collections: UserCollections,
    collection: Any,
    ids: Sequence[str],
    doing: str = "read memories to reconcile the index",
) -> dict[str, StoredRow]:
    """Chroma's ``(document, metadata, embedding)`` of those ``ids`` it holds (``doing`` names
    the read in a backend error)."""
    found: dict[str, StoredRow] = {}
    if collection is None or not ids:
        return found
    with collections.backend(doing):
        for start in range(0, len(ids), collections.max_batch):
            got = collection.get(
                ids=list(ids[start : start + collections.max_batch]),
                include=["documents", "metadatas", "embeddings"],
            )
            for ident, text, meta, vector in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            ):
                found[ident] = (text, meta, vector)
    return found


def _announced_counts(intent: Mapping[str, Any]) -> Counts:
    meta: Mapping[str, Any] = intent.get("meta") or {}
    count = meta.get("recall_count", 0)
    last_at = meta.get("last_recalled_at")
    if isinstance(last_at, str):
        return int(count), normalize_timestamp(last_at).epoch, last_at
    return int(count), None, None


def reconcile(
    backend: Backend,
    collections: UserCollections,
    key: int,
    collection: Any,
    entries: Sequence[Entry],
    *,
    counts: Mapping[str, Counts] | None = None,
    stored: Mapping[str, StoredRow] | None = None,
) -> SyncReport:
    """Settle ``entries`` by what Chroma holds for their ids, in one transaction.

    ``counts`` (an undo's) replace the index's counts of the ids Chroma still holds;
    ``stored`` is Chroma's rows of the ids when the caller has just read them.
    """
    if not entries:
        return SyncReport()
    ids = [entry.memory_id for entry in entries]
    if stored is None:
        stored = stored_rows(collections, collection, ids)
    docs: list[IndexedDoc] = []
    gone: list[str] = []
    for entry in entries:
        row = stored.get(entry.memory_id)
        if row is None:
            gone.append(entry.memory_id)
            continue
        text, meta, vector = row
        doc = doc_from_stored(
            entry.memory_id, text, meta, replace_counts=False, embedding=vector
        )
        if entry.op == "write" and matches(entry.intent, text, meta):
            count, last_epoch, last_at = _announced_counts(entry.intent)
        elif counts is not None and entry.memory_id in counts:
            count, last_epoch, last_at = counts[entry.memory_id]
        else:
            docs.append(doc)  # the index's counts stay (Chroma's only for a new row)
            continue
        docs.append(
            replace(
                doc,
                recall_count=count,
                last_recalled_epoch=last_epoch,
                last_recalled_at=last_at,
                replace_counts=True,
            )
        )

    def work(tx: Tx) -> int:
        removed = len(remove_docs(tx, key, gone))
        put_docs(tx, key, docs)
        settle(tx, key, ids)
        return removed

    removed = backend.write(work)
    return SyncReport(indexed=len(docs), removed=removed, reconciled=len(entries))


def index_held(
    backend: Backend, collections: UserCollections, key: int, collection: Any, ids: Sequence[str]
) -> SyncReport:
    """Index those of ``ids`` that Chroma holds now, whatever their journal entries' due time.

    For a turn that surfaced memories the index lacks (their add is in Chroma, its settling
    not yet in the index); the caller holds the user's lock, so no live writer is between
    Chroma and the index. An id with an entry is settled only when Chroma holds the very row
    the entry announced: that call has landed and can change nothing more. Any other entry
    (an upsert or forget a timed-out call may still make) keeps waiting for its due time.
    """
    wanted = list(dict.fromkeys(ids))
    stored = stored_rows(collections, collection, wanted)
    if not stored:
        return SyncReport()
    pending = {
        entry.memory_id: entry
        for entry in backend.read(lambda tx: journal_entries(tx, key))
        if entry.memory_id in stored
    }
    chosen: list[Entry] = []
    for ident in wanted:
        row = stored.get(ident)
        if row is None:
            continue
        entry = pending.get(ident)
        if entry is None:
            chosen.append(Entry(ident, "resync", {}))
        elif entry.op == "write" and matches(entry.intent, row[0], row[1]):
            chosen.append(entry)
    return reconcile(backend, collections, key, collection, chosen, stored=stored)


def _put_page(backend: Backend, key: int, docs: list[IndexedDoc], *, rebuild: bool) -> None:
    backend.write(lambda tx: put_docs(tx, key, docs, rebuild=rebuild))


def backfill(
    backend: Backend,
    collections: UserCollections,
    key: int,
    user_id: str,
    collection: Any,
    *,
    progress: bool | None = None,
) -> SyncReport:
    """Index what ``collection`` holds and the index lacks; drop what it no longer holds."""
    state = backend.read(
        lambda tx: tx.one(
            "SELECT doc_count, analyzer, ranked_fields FROM index_users WHERE user_key = ?",
            (key,),
        )
    )
    held, analyzer, ranked = (0, ANALYZER, FIELDS_LEVEL) if state is None else state
    held = int(held)
    if collection is None:
        if not held:
            return SyncReport()
        backend.write(lambda tx: remove_user_docs(tx, key))
        return SyncReport(removed=held)
    with collections.backend(f"count the memories of user {shown(user_id)}"):
        stored = int(collection.count())
    rebuild = analyzer != ANALYZER
    # indexed before migration 3 or 5: every row gets its ranked fields and filter tags
    refill = int(ranked) < FIELDS_LEVEL
    if stored == held and not rebuild and not refill:
        return SyncReport()
    why = " (re-indexing for a new analyzer)" if rebuild else ""
    if refill and not why:
        why = " (adding the fields ranking and filters read)"
    logger.info(
        "indexing the memories of user %s: Chroma holds %d, the index %d%s",
        shown(user_id),
        stored,
        held,
        why,
    )
    from tqdm import tqdm

    show = progress if progress is not None else sys.stderr.isatty()
    bar = tqdm(
        total=stored,
        unit="memory",
        desc="index",
        disable=not (show and abs(stored - held) >= _PROGRESS_MIN),
        file=sys.stderr,
    )
    seen: set[str] = set()
    indexed = 0
    with bar:
        offset = 0
        while True:
            with collections.backend(f"read the memories of user {shown(user_id)} to index"):
                got = collection.get(
                    include=["documents", "metadatas", "embeddings"], limit=PAGE, offset=offset
                )
            docs = [
                doc_from_stored(ident, text, meta, replace_counts=False, embedding=vector)
                for ident, text, meta, vector in zip(
                    got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
                )
                if ident not in seen
            ]
            if docs:
                _put_page(backend, key, docs, rebuild=rebuild)
            seen.update(doc.memory_id for doc in docs)
            indexed += len(docs)
            bar.update(len(got["ids"]))
            offset += len(got["ids"])
            if len(got["ids"]) < PAGE:
                break

    def prune(tx: Tx) -> int:
        held_ids = [
            memory_id
            for (memory_id,) in tx.rows(
                "SELECT memory_id FROM index_docs WHERE user_key = ?", (key,)
            )
        ]
        removed = remove_docs(tx, key, [ident for ident in held_ids if ident not in seen])
        tx.run(
            "UPDATE index_users SET analyzer = ?, ranked_fields = ? WHERE user_key = ?",
            (ANALYZER, FIELDS_LEVEL, key),
        )
        return len(removed)

    removed = backend.write(prune)
    return SyncReport(indexed=indexed, removed=removed)
