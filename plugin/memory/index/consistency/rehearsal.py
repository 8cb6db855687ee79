"""Rehearsal: the authoritative recall counts and last-recalled times, and their increments.

A turn that surfaced a memory counts once for it, however often the turn is applied: the
increment inserts ``(memory, turn id)`` under a unique key and bumps the count only for the
rows that insert created, all in one transaction. So two processes applying turns at once
lose no increment (the database serialises the row updates), and a replayed turn adds
nothing. The last-recalled time only moves forward, so applying turns in any order ends the
same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.index.storage.schema import in_chunks, placeholders
from affect_memory.memory.records import MAX_RECALL_COUNT

__all__ = ["IndexedFields", "RecallOutcome", "Rehearsal", "read_rehearsal", "record_recalls"]


@dataclass(frozen=True, slots=True)
class IndexedFields:
    """What ranking reads of each memory's Chroma row, as the index holds it (migration 3),
    aligned with the ids asked for; ``known`` is False where the index lacks any of them."""

    known: npt.NDArray[np.bool_]
    texts: list[str | None]
    timestamps: list[str | None]
    """The ISO timestamps as Chroma's metadata holds them."""
    significance: npt.NDArray[np.float64]
    """0 where not known, as are ``emotional_valence`` and ``episodes``."""
    emotional_valence: npt.NDArray[np.float64]
    episodes: npt.NDArray[np.bool_]
    embeddings: list[bytes | None] | None = None
    """Each memory's embedding as the index keeps it (``documents.embedding_bytes``; None: not
    held), when asked for; independent of ``known``."""


@dataclass(frozen=True, slots=True)
class Rehearsal:
    """Recall counts and last-recalled epochs (NaN: never) aligned with the ids asked for."""

    ids: list[str]
    recall_counts: npt.NDArray[np.int64]
    last_recalled: npt.NDArray[np.float64]
    last_recalled_at: list[str | None]
    """The last-recalled times as canonical ISO text (None: never)."""
    found: npt.NDArray[np.bool_]
    """Whether the index holds each id (count 0 and NaN where it does not)."""
    epochs: npt.NDArray[np.float64]
    """Each memory's timestamp in epoch seconds (NaN: unknown), which recall's pruned fetch
    reads to bound a memory's recency before fetching its row from Chroma."""
    ranked: IndexedFields | None = None
    """Each memory's ranked fields, when asked for (``fields``); recall then reads from Chroma
    only the rows these lack."""

    def __len__(self) -> int:
        """How many ids were asked for."""
        return len(self.ids)


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    """What recording one turn's recalls did, per id asked for."""

    incremented: tuple[str, ...]
    already: tuple[str, ...]
    """Memories that already counted this turn."""
    missing: tuple[str, ...]
    """Ids the index does not hold."""


def read_rehearsal(
    tx: Tx, key: int, ids: Sequence[str], *, fields: bool = False, embeddings: bool = False
) -> Rehearsal:
    """The counts of ``ids`` for user ``key``; with ``fields``, their ranked fields too, and
    with ``embeddings`` as well (only with ``fields``), the embeddings the index keeps of them:
    None for one with a write or forget in flight (a pending journal entry), whose Chroma row
    may already be the new one."""
    found: dict[str, tuple[Any, ...]] = {}
    columns = "d.memory_id, d.recall_count, d.last_recalled_epoch, d.last_recalled_at, d.epoch"
    source = "index_docs d"
    if fields:
        columns += ", d.doc_text, d.stamp, d.significance, d.valence, d.episode"
        if embeddings:
            columns += ", CASE WHEN j.memory_id IS NULL THEN d.embedding END"
            source += (
                " LEFT JOIN index_journal j ON j.user_key = d.user_key"
                " AND j.memory_id = d.memory_id"
            )
    for part in in_chunks(list(dict.fromkeys(ids))):
        for row in tx.rows(
            f"SELECT {columns} FROM {source} "
            f"WHERE d.user_key = ? AND d.memory_id IN ({placeholders(len(part))})",
            (key, *part),
        ):
            found[row[0]] = row
    held = [found.get(ident) for ident in ids]
    nan = math.nan
    counts = np.array([0 if row is None else row[1] for row in held], dtype=np.int64)
    last = np.array(
        [nan if row is None or row[2] is None else row[2] for row in held], dtype=np.float64
    )
    stamps: list[str | None] = [
        None if row is None or row[2] is None else row[3] for row in held
    ]
    present = np.array([row is not None for row in held], dtype=bool)
    epochs = np.array(
        [nan if row is None or row[4] is None else row[4] for row in held], dtype=np.float64
    )
    ranked = _fields(held, embeddings) if fields else None
    return Rehearsal(list(ids), counts, last, stamps, present, epochs, ranked)


def _fields(held: list[tuple[Any, ...] | None], embeddings: bool) -> IndexedFields:
    """The ranked fields of ``read_rehearsal``'s rows (``None``: a row the index lacks), and
    their embeddings (the eleventh column) when read."""
    known = [
        row is not None and row[4] is not None and None not in row[5:10] for row in held
    ]
    full: list[tuple[Any, ...]] = [
        row if ok and row is not None else _UNKNOWN for row, ok in zip(held, known, strict=True)
    ]
    return IndexedFields(
        known=np.array(known, dtype=bool),
        texts=[row[5] for row in full],
        timestamps=[row[6] for row in full],
        significance=np.array([row[7] for row in full], dtype=np.float64),
        emotional_valence=np.array([row[8] for row in full], dtype=np.float64),
        episodes=np.array([row[9] == 1 for row in full], dtype=bool),
        embeddings=[
            None if row is None or row[10] is None else bytes(row[10]) for row in held
        ]
        if embeddings
        else None,
    )


_UNKNOWN = (None, 0, None, None, None, None, None, 0.0, 0.0, 0)
"""A row whose ranked fields the index lacks, as ``_fields`` reads it."""


def record_recalls(
    tx: Tx, key: int, turn_id: str, ids: Sequence[str], *, epoch: float, iso: str
) -> RecallOutcome:
    """Count turn ``turn_id``'s recall of ``ids`` once each, at ``epoch`` / ``iso``."""
    wanted = list(dict.fromkeys(ids))
    docs: dict[str, int] = {}
    for part in in_chunks(wanted):
        docs.update(
            (memory_id, int(doc_key))
            for doc_key, memory_id in tx.rows(
                "SELECT doc_key, memory_id FROM index_docs "
                f"WHERE user_key = ? AND memory_id IN ({placeholders(len(part))})",
                (key, *part),
            )
        )
    fresh: set[int] = set()
    ordered = sorted(docs.values())  # one lock order for every writer
    for keys in in_chunks(ordered, 300):
        values = ", ".join("(?, ?, ?)" for _ in keys)
        params = [value for doc_key in keys for value in (key, doc_key, turn_id)]
        fresh.update(
            int(doc_key)
            for (doc_key,) in tx.rows(
                f"INSERT INTO index_recalls (user_key, doc_key, turn_id) VALUES {values} "
                "ON CONFLICT DO NOTHING RETURNING doc_key",
                params,
            )
        )
    bumped = sorted(fresh)
    for bumped_keys in in_chunks(bumped):
        tx.run(
            "UPDATE index_docs SET "
            "recall_count = CASE WHEN recall_count < ? THEN recall_count + 1 "
            "ELSE recall_count END, "
            "last_recalled_at = CASE WHEN last_recalled_epoch IS NULL OR last_recalled_epoch < ? "
            "THEN ? ELSE last_recalled_at END, "
            "last_recalled_epoch = CASE WHEN last_recalled_epoch IS NULL "
            "OR last_recalled_epoch < ? THEN ? ELSE last_recalled_epoch END "
            f"WHERE user_key = ? AND doc_key IN ({placeholders(len(bumped_keys))})",
            (MAX_RECALL_COUNT, epoch, iso, epoch, epoch, key, *bumped_keys),
        )
    return RecallOutcome(
        incremented=tuple(ident for ident in wanted if docs.get(ident) in fresh),
        already=tuple(ident for ident in wanted if ident in docs and docs[ident] not in fresh),
        missing=tuple(ident for ident in wanted if ident not in docs),
    )
