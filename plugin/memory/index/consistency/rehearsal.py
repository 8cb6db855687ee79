"""Rehearsal: the authoritative recall counts and last-recalled times, and their increments.

A turn that surfaced a memory counts once for it, however often the turn is applied: the
increment inserts ``(memory, turn id)`` under a unique key and bumps the count only for the
rows that insert created, all in one transaction. So two processes applying turns at once
lose no increment (the database serialises the row updates), and a replayed turn adds
nothing. The last-recalled time only moves forward, so applying turns in any order ends the
same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.index.storage.schema import in_chunks, placeholders
from affect_memory.memory.records import MAX_RECALL_COUNT

__all__ = [
    "IndexRow",
    "IndexedFields",
    "RecallOutcome",
    "Rehearsal",
    "read_rehearsal",
    "read_rows",
    "record_recalls",
    "rehearsal_of",
]


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


IndexRow = tuple[Any, ...]
"""One memory's row as ``read_rows`` reads it: id, recall count, last-recalled epoch and ISO
time, timestamp epoch; with the ranked fields, its text, ISO timestamp, significance,
valence and episode flag; with embeddings, its embedding (None while a write or forget of it
is in flight); last, its document key."""


def read_rows(
    tx: Tx,
    key: int,
    wanted: Sequence[str] | Sequence[int],
    *,
    by_doc_key: bool = False,
    fields: bool = False,
    embeddings: bool = False,
) -> dict[str, IndexRow]:
    """The rows of user ``key``'s memories ``wanted`` (memory ids, or document keys with
    ``by_doc_key``) that the index holds, by memory id; with ``fields`` the ranked fields,
    and with ``embeddings`` as well (only with ``fields``) the embeddings the index keeps: None
    for one with a write or forget in flight (a pending journal entry), whose Chroma row may
    already be the new one."""
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
    column = "d.doc_key" if by_doc_key else "d.memory_id"
    found: dict[str, IndexRow] = {}
    for part in in_chunks(list(dict.fromkeys(wanted))):
        for row in tx.rows(
            f"SELECT {columns}, d.doc_key FROM {source} "
            f"WHERE d.user_key = ? AND {column} IN ({placeholders(len(part))})",
            (key, *part),
        ):
            found[row[0]] = row
    return found


def read_rehearsal(
    tx: Tx, key: int, ids: Sequence[str], *, fields: bool = False, embeddings: bool = False
) -> Rehearsal:
    """The counts of ``ids`` for user ``key``; with ``fields``, their ranked fields too, and
    with ``embeddings`` as well (only with ``fields``), the embeddings the index keeps of them
    (``read_rows``)."""
    found = read_rows(tx, key, ids, fields=fields, embeddings=embeddings)
    return rehearsal_of(ids, found, fields=fields, embeddings=embeddings)


def rehearsal_of(
    ids: Sequence[str],
    found: Mapping[str, IndexRow],
    *,
    fields: bool = False,
    embeddings: bool = False,
) -> Rehearsal:
    """The rehearsal of ``ids`` from rows ``read_rows`` read with the same ``fields`` and
    ``embeddings`` (an id without a row: one the index does not hold)."""
    held = [found.get(ident, _ABSENT) for ident in ids]
    present = np.array([row is not _ABSENT for row in held], dtype=bool)
    columns = list(zip(*held, strict=False)) or [()] * len(_ABSENT)  # one tuple per column
    last = np.array(columns[2], dtype=np.float64)  # None (never) reads as NaN
    stamps: list[str | None] = [
        None if epoch is None else at for epoch, at in zip(columns[2], columns[3], strict=True)
    ]
    epochs = np.array(columns[4], dtype=np.float64)
    ranked = _fields(held, columns, embeddings) if fields else None
    counts = np.array(columns[1], dtype=np.int64)
    return Rehearsal(list(ids), counts, last, stamps, present, epochs, ranked)


def _fields(
    held: list[IndexRow], columns: list[tuple[Any, ...]], embeddings: bool
) -> IndexedFields:
    """The ranked fields of ``read_rows``'s rows (``_ABSENT``: one the index lacks) and their
    columns, and their embeddings (the eleventh column) when read; a row missing any field
    reads as unknown (no text or timestamp, zeros)."""
    known = np.array([None not in row[4:10] for row in held], dtype=bool)
    every = bool(known.all())
    return IndexedFields(
        known=known,
        texts=list(columns[5]) if every else _where_known(columns[5], known),
        timestamps=list(columns[6]) if every else _where_known(columns[6], known),
        significance=np.where(known, np.array(columns[7], dtype=np.float64), 0.0),
        emotional_valence=np.where(known, np.array(columns[8], dtype=np.float64), 0.0),
        episodes=known & (np.array(columns[9], dtype=np.float64) == 1),
        embeddings=[None if blob is None else bytes(blob) for blob in columns[10]]
        if embeddings
        else None,
    )


def _where_known(values: tuple[Any, ...], known: npt.NDArray[np.bool_]) -> list[Any]:
    return [value if ok else None for value, ok in zip(values, known.tolist(), strict=True)]


_ABSENT: IndexRow = (None, 0, *([None] * 10))
"""The row of an id the index does not hold: never recalled, no fields, no embedding."""


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
