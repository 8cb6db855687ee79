"""The journal: every write that touches Chroma is announced in the index before it is made.

A write of one user's memories runs, under that user's lock, as

1. *announce*: one transaction records, per memory id, what is about to happen (``write``
   with the record's text hash and metadata, ``forget``, or ``resync`` for an undo);
2. the Chroma call;
3. *settle*: one transaction applies the change to the index and deletes the entries.

A process killed anywhere in between leaves entries behind, and nothing else half done:
each transaction is whole, Chroma's call is whole. Whoever next holds the user's lock (a
writer, the opening of a store, a first query) reconciles them by asking Chroma: an id it
does not hold is removed from the index, an id it holds is indexed with Chroma's text, and
with the announced counts when Chroma's row is the announced one (see
``affect_memory.memory.index.consistency.sync``). An entry is only reconciled by a holder of the
user's lock, so a live writer's entries are never taken for a dead one's.

A Chroma call that timed out may still land later (a server finishes what it received), so
its entries are left for the Chroma timeout plus ``AMBIGUOUS_GRACE`` seconds before anyone
reconciles them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from affect_memory.memory.index.consistency.documents import text_hash
from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.index.storage.schema import in_chunks, placeholders
from affect_memory.memory.records import MemoryRecord

__all__ = [
    "AMBIGUOUS_GRACE",
    "INTENT_KEYS",
    "Entry",
    "Op",
    "announce",
    "defer",
    "entries",
    "matches",
    "settle",
    "write_intent",
]

AMBIGUOUS_GRACE = 30.0
"""Seconds past a failed Chroma call's timeout before its entries are reconciled."""

Op = Literal["write", "forget", "resync"]
"""What an entry announced: a record written, a memory deleted, or an undo (mirror Chroma)."""

INTENT_KEYS = (
    "timestamp",
    "significance",
    "episode",
    "emotional_valence",
    "recall_count",
    "last_recalled_at",
)
"""The metadata that tells an announced row from the row it replaces."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One pending journal entry."""

    memory_id: str
    op: Op
    intent: Mapping[str, Any]


def write_intent(record: MemoryRecord) -> dict[str, Any]:
    """What a ``write`` entry records: the text's hash and the record's own metadata."""
    metadata = record.to_metadata()
    return {
        "text_hash": text_hash(record.text),
        "meta": {key: metadata[key] for key in INTENT_KEYS if key in metadata},
    }


def matches(intent: Mapping[str, Any], text: object, metadata: Mapping[str, Any] | None) -> bool:
    """Whether the row Chroma holds is the one a ``write`` entry announced."""
    if not isinstance(text, str) or intent.get("text_hash") != text_hash(text):
        return False
    stored = metadata or {}
    announced: Mapping[str, Any] = intent.get("meta") or {}
    return all(
        key in stored and stored[key] == value and type(stored[key]) is type(value)
        for key, value in announced.items()
    )


def announce(
    tx: Tx, key: int, op: Op, items: Sequence[tuple[str, Mapping[str, Any]]], *, due: float
) -> None:
    """Record ``op`` for each ``(memory id, intent)``, replacing an older entry of the id."""
    tx.many(
        "INSERT INTO index_journal (user_key, memory_id, op, intent, due) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (user_key, memory_id) DO UPDATE SET op = excluded.op, "
        "intent = excluded.intent, due = excluded.due",
        [
            (key, memory_id, op, json.dumps(intent, separators=(",", ":")), due)
            for memory_id, intent in items
        ],
    )


def settle(tx: Tx, key: int, ids: Sequence[str]) -> None:
    """Delete the entries of ``ids``: their change is now in the index."""
    for part in in_chunks(list(ids)):
        tx.run(
            f"DELETE FROM index_journal WHERE user_key = ? AND memory_id IN "
            f"({placeholders(len(part))})",
            (key, *part),
        )


def defer(tx: Tx, key: int, ids: Sequence[str], *, due: float) -> None:
    """Leave the entries of ``ids`` alone until ``due`` (epoch seconds)."""
    for part in in_chunks(list(ids)):
        tx.run(
            f"UPDATE index_journal SET due = ? WHERE user_key = ? AND memory_id IN "
            f"({placeholders(len(part))})",
            (due, key, *part),
        )


def entries(tx: Tx, key: int, *, due_by: float | None = None) -> list[Entry]:
    """The user's pending entries (only those due by ``due_by`` when given), by id."""
    if due_by is None:
        rows = tx.rows(
            "SELECT memory_id, op, intent FROM index_journal WHERE user_key = ? "
            "ORDER BY memory_id",
            (key,),
        )
    else:
        rows = tx.rows(
            "SELECT memory_id, op, intent FROM index_journal WHERE user_key = ? AND due <= ? "
            "ORDER BY memory_id",
            (key, due_by),
        )
    return [Entry(memory_id, op, json.loads(intent)) for memory_id, op, intent in rows]
