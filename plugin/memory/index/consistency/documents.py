"""One user's indexed memories inside a transaction: their rows, postings and BM25 totals.

Everything here runs inside one ``Tx``: a memory is indexed (its row, its postings, the
user's N and total length) or removed whole, so no reader ever sees half of one. A memory
whose text is unchanged keeps its postings; counts are either set from the written record
(``IndexedDoc.replace_counts``: an add or upsert) or kept from the index (a resync from
Chroma, where the index is the authority). Every write of a memory also sets the fields
ranking reads of its Chroma row (``RankedFields``: text, timestamp, significance, valence,
episode), so recall ranks from the index alone; they are NULL where the row is not one
ranking could score (malformed metadata, another user's id), so recall reads such a row from
Chroma and skips or refuses it as it always did. Every write sets its embedding too, the
bytes of the very values Chroma returns for it (``embedding_bytes``), so the cosine
recall computes from the index's copy is the one it computed from Chroma's; NULL when Chroma's
was not read or is no plain vector, and recall then reads it from Chroma. And every write sets
its filter tags (``index_tags``: ``agent_id``, ``conversation_id``, ``extra`` keys, from the
metadata Chroma holds), so a filtered recall restricts its lexical candidates in SQL; a
document whose metadata was not read is untagged (``tagged`` NULL) and no filtered search
finds it lexically until a backfill tags it (Chroma's filtered query still does).

The module is about 500 lines because every function here writes the same rows inside one
transaction (the row, its postings, the totals, the filter tags, the ranked fields and the
embedding) under one invariant, a memory indexed or removed whole; split, that invariant would have
no single home.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from affect_memory.errors import StoreError
from affect_memory.kernel.errors import shown
from affect_memory.memory.filters import metadata_tags
from affect_memory.memory.index.lexical.analyzer import ANALYZER, document_terms
from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.index.storage.schema import FIELDS_LEVEL, in_chunks, placeholders
from affect_memory.memory.records import MAX_RECALL_COUNT, MemoryRecord
from affect_memory.memory.timestamps import MAX_EPOCH

__all__ = [
    "ALL_DOCS",
    "CHANGES_KEPT",
    "IndexedDoc",
    "RankedFields",
    "UserTotals",
    "doc_from_record",
    "doc_from_stored",
    "embedding_bytes",
    "ensure_user",
    "put_docs",
    "remove_docs",
    "remove_user_docs",
    "text_hash",
]


ALL_DOCS = -1
"""The document key a change of every document of a user is logged under (a reset)."""

CHANGES_KEPT = 5000
"""Generations of each user's change log kept; a cache further behind starts over."""


def _changed(tx: Tx, key: int, doc_keys: Sequence[int]) -> None:
    """Log that the postings of ``doc_keys`` changed: the user's next generation."""
    if not doc_keys:
        return
    row = tx.one(
        "UPDATE index_users SET generation = generation + 1 WHERE user_key = ? "
        "RETURNING generation",
        (key,),
    )
    if row is None:
        return
    generation = int(row[0])
    tx.many(
        "INSERT INTO index_changes (user_key, generation, doc_key) VALUES (?, ?, ?)",
        [(key, generation, doc_key) for doc_key in sorted(set(doc_keys))],
    )
    if generation % 100 == 0:
        tx.run(
            "DELETE FROM index_changes WHERE user_key = ? AND generation <= ?",
            (key, generation - CHANGES_KEPT),
        )


def text_hash(text: str) -> str:
    """A 128-bit hash of a memory's text: what tells an unchanged text from a new one."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class RankedFields:
    """What ranking reads of a memory's Chroma row besides its epoch and counts."""

    owner: str
    """The row's ``user_id`` metadata: fields of a row of another user are not stored."""
    timestamp: str
    """The ISO timestamp as Chroma's metadata holds it."""
    significance: float
    emotional_valence: float
    episode: bool


@dataclass(frozen=True, slots=True)
class IndexedDoc:
    """One memory as the index holds it."""

    memory_id: str
    text: str
    epoch: float | None
    recall_count: int
    last_recalled_epoch: float | None
    last_recalled_at: str | None
    replace_counts: bool
    """True: the counts above replace the index's (a write); False: the index's stay."""
    ranked: RankedFields | None
    """The row's ranked fields, or None when ranking must read (and check) Chroma's row."""
    turns: tuple[str, ...] = ()
    """Turn ids already counted in ``recall_count`` (from a store written before the index)."""
    embedding: bytes | None = None
    """The row's embedding as Chroma holds it (``embedding_bytes``), or None: not known."""
    tags: tuple[tuple[str, str], ...] | None = None
    """The row's filter tags (``affect_memory.memory.filters.metadata_tags``), or None: not
    known (its metadata was not read)."""


@dataclass(frozen=True, slots=True)
class UserTotals:
    """A user's BM25 statistics."""

    doc_count: int
    total_length: int


def embedding_bytes(value: object) -> bytes | None:
    """Chroma's embedding of one row as the index keeps it: the little-endian float32 bytes
    of its values, or None unless it is a non-empty finite vector of floats.

    Chroma stores float32; an embedded client returns them widened to float64 (the same
    values), but an HTTP client parses each from its shortest decimal, a float64 that is no
    float32. Such a vector is kept as little-endian float64 bytes instead (twice as long), so
    the cosine recall computes from the index is always the one it computed from Chroma's.
    """
    if value is None:
        return None
    try:
        vector = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if vector.ndim != 1 or not vector.size or vector.dtype.kind != "f":
        return None
    if not np.isfinite(vector).all():
        return None
    narrow = vector.astype("<f4")
    if np.array_equal(narrow, vector):
        return narrow.tobytes()
    return vector.astype("<f8").tobytes()


def doc_from_record(
    record: MemoryRecord, stored: Mapping[str, Any] | None, embedding: object = None
) -> IndexedDoc:
    """The index row an add or upsert of ``record`` writes (its counts replace the index's).

    ``stored`` and ``embedding`` are the metadata and embedding Chroma holds for it now, read
    back after the write: its ranked fields are Chroma's own values (Chroma may return a float
    a unit in the last place off the one written), so recall ranks exactly as from Chroma's
    row; None (the read failed) leaves them NULL, and recall reads the row from Chroma.
    """
    last_epoch = None
    if record.last_recalled_at is not None:
        from affect_memory.memory.timestamps import normalize_timestamp

        last_epoch = normalize_timestamp(record.last_recalled_at).epoch
    return IndexedDoc(
        memory_id=record.id,
        text=record.text,
        epoch=record.timestamp_epoch,
        recall_count=int(record.recall_count),
        last_recalled_epoch=last_epoch,
        last_recalled_at=record.last_recalled_at,
        replace_counts=True,
        ranked=None if stored is None else _ranked_stored(record.text, stored),
        embedding=embedding_bytes(embedding),
        tags=None if stored is None else metadata_tags(stored),
    )


def _storable(text: str, fields: RankedFields) -> RankedFields | None:
    """``fields``, unless the text or timestamp holds a NUL (PostgreSQL's text refuses one)."""
    return None if "\x00" in text or "\x00" in fields.timestamp else fields


def _ranked_stored(text: object, meta: Mapping[str, Any]) -> RankedFields | None:
    """The ranked fields of a stored row that ranking could score, else None."""
    from affect_memory.memory.chroma.rows import row_problem

    owner = meta.get("user_id")
    if not isinstance(text, str) or not isinstance(owner, str) or row_problem(text, meta):
        return None
    return _storable(
        text,
        RankedFields(
            owner,
            meta["timestamp"],
            float(meta["significance"]),
            float(meta["emotional_valence"]),
            meta["episode"],
        ),
    )


def _epoch(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0.0 <= value <= MAX_EPOCH else None


def doc_from_stored(
    memory_id: str,
    text: object,
    metadata: Mapping[str, Any] | None,
    *,
    replace_counts: bool,
    embedding: object = None,
) -> IndexedDoc:
    """The index row of a row Chroma holds; its counts are what Chroma recorded (the values
    a store written before the index carries), used only where the index has none; its
    ``embedding`` as Chroma returned it (None: not read)."""
    meta = metadata or {}
    count = meta.get("recall_count")
    turns = meta.get("recall_turns")
    last_at = meta.get("last_recalled_at")
    last_epoch = _epoch(meta.get("last_recalled_epoch"))
    if not isinstance(last_at, str) or last_epoch is None:
        last_at, last_epoch = None, None
    return IndexedDoc(
        memory_id=memory_id,
        text=text if isinstance(text, str) else "",
        epoch=_epoch(meta.get("timestamp_epoch")),
        recall_count=count if type(count) is int and 0 <= count <= MAX_RECALL_COUNT else 0,
        last_recalled_epoch=last_epoch,
        last_recalled_at=last_at,
        replace_counts=replace_counts,
        ranked=_ranked_stored(text, meta),
        turns=tuple(t for t in turns if isinstance(t, str) and t)
        if isinstance(turns, list)
        else (),
        embedding=embedding_bytes(embedding),
        tags=None if metadata is None else metadata_tags(metadata),
    )


def _fresh_generation() -> int:
    """A new user row's first postings generation: microseconds since the epoch."""
    return time.time_ns() // 1000


def ensure_user(tx: Tx, key: int, collection: str, collection_id: str, user_id: str) -> bool:
    """Make sure the index has ``collection``'s user row; True when it was (re)started empty.

    A collection recreated under the same name (a new Chroma id) starts the user over: the
    rows of the old collection describe memories that are gone.
    """
    row = tx.one(
        "SELECT collection, collection_id FROM index_users WHERE user_key = ?", (key,)
    )
    if row is None:
        # A user row made again (after an erasure) starts its postings generation past any a
        # process may still cache for the old row, so no cache takes the new postings for old.
        tx.run(
            "INSERT INTO index_users (user_key, collection, collection_id, user_id, analyzer, "
            "ranked_fields, generation) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, collection, collection_id, user_id, ANALYZER, FIELDS_LEVEL, _fresh_generation()),
        )
        return True
    if row[0] != collection:
        raise StoreError(
            f"the memory index cannot tell collections {row[0]!r} and {collection!r} apart "
            f"(their 63-bit keys collide); user {shown(user_id)} needs an index of its own"
        )
    if row[1] == collection_id:
        return False
    remove_user_docs(tx, key)
    tx.run("DELETE FROM index_journal WHERE user_key = ?", (key,))
    tx.run(
        "UPDATE index_users SET collection_id = ?, analyzer = ?, doc_count = 0, "
        "total_length = 0, ranked_fields = ? WHERE user_key = ?",
        (collection_id, ANALYZER, FIELDS_LEVEL, key),
    )
    return True


def remove_user_docs(tx: Tx, key: int) -> None:
    """Drop every memory of a user (their row stays, with zero totals)."""
    for table in ("index_postings", "index_recalls", "index_tags", "index_docs"):
        tx.run(f"DELETE FROM {table} WHERE user_key = ?", (key,))
    tx.run("UPDATE index_users SET doc_count = 0, total_length = 0 WHERE user_key = ?", (key,))
    _changed(tx, key, [ALL_DOCS])


def _existing(tx: Tx, key: int, ids: Sequence[str]) -> dict[str, tuple[int, str, int]]:
    """``memory id -> (doc key, text hash, length)`` of the ids the index holds."""
    found: dict[str, tuple[int, str, int]] = {}
    for part in in_chunks(ids):
        for doc_key, memory_id, digest, length in tx.rows(
            "SELECT doc_key, memory_id, text_hash, length FROM index_docs "
            f"WHERE user_key = ? AND memory_id IN ({placeholders(len(part))})",
            (key, *part),
        ):
            found[memory_id] = (int(doc_key), digest, int(length))
    return found


def _delete_postings(tx: Tx, key: int, doc_keys: Sequence[int]) -> None:
    for part in in_chunks(doc_keys):
        tx.run(
            f"DELETE FROM index_postings WHERE user_key = ? AND doc_key IN "
            f"({placeholders(len(part))})",
            (key, *part),
        )


_NO_FIELDS = (None, None, None, None, None)


def _ranked_values(doc: IndexedDoc, owner: str) -> tuple[Any, ...]:
    """``doc_text, stamp, significance, valence, episode`` of ``doc`` (NULLs: unknown)."""
    ranked = doc.ranked
    if ranked is None or ranked.owner != owner or doc.epoch is None:
        return _NO_FIELDS
    return (
        doc.text,
        ranked.timestamp,
        ranked.significance,
        ranked.emotional_valence,
        int(ranked.episode),
    )


def _put_tags(tx: Tx, key: int, tagged: Sequence[tuple[int, IndexedDoc]]) -> None:
    """Replace the filter tags of these documents (doc key, doc) with each doc's own."""
    keys = [doc_key for doc_key, _ in tagged]
    for part in in_chunks(keys):
        tx.run(
            f"DELETE FROM index_tags WHERE user_key = ? AND doc_key IN ({placeholders(len(part))})",
            (key, *part),
        )
    tx.many(
        "INSERT INTO index_tags (user_key, doc_key, field, value) VALUES (?, ?, ?, ?)",
        [
            (key, doc_key, field, value)
            for doc_key, doc in tagged
            for field, value in doc.tags or ()
        ],
    )
    tx.many(
        "UPDATE index_docs SET tagged = ? WHERE user_key = ? AND doc_key = ?",
        [(None if doc.tags is None else 1, key, doc_key) for doc_key, doc in tagged],
    )


def put_docs(tx: Tx, key: int, docs: Sequence[IndexedDoc], *, rebuild: bool = False) -> None:
    """Index ``docs`` for user ``key``: new ones added, known ones brought up to date.

    ``rebuild`` re-derives the postings of unchanged texts too (a new analyzer).
    """
    if not docs:
        return
    latest = {doc.memory_id: doc for doc in docs}  # the last write of an id wins
    docs = list(latest.values())
    existing = _existing(tx, key, [doc.memory_id for doc in docs])
    fresh = [doc for doc in docs if doc.memory_id not in existing]
    row = tx.one(
        "UPDATE index_users SET next_doc = next_doc + ? WHERE user_key = ? "
        "RETURNING next_doc, user_id",
        (len(fresh), key),
    )
    if row is None:
        raise StoreError(f"the memory index has no user row {key} (a write outside a session?)")
    next_key = int(row[0]) - len(fresh)
    owner = row[1]
    postings: list[tuple[int, str, int, int, int]] = []
    new_rows: list[tuple[Any, ...]] = []
    added_length = 0
    stale: list[int] = []
    doc_updates: list[tuple[Any, ...]] = []
    count_updates: list[tuple[Any, ...]] = []
    tagged: list[tuple[int, IndexedDoc]] = []
    for doc in docs:
        digest = text_hash(doc.text)
        known = existing.get(doc.memory_id)
        if known is None:
            doc_key = next_key
            next_key += 1
            tagged.append((doc_key, doc))
            terms, length = document_terms(doc.text)
            postings.extend((key, term, doc_key, tf, length) for term, tf in terms.items())
            added_length += length
            new_rows.append(
                (
                    key,
                    doc_key,
                    doc.memory_id,
                    digest,
                    length,
                    doc.epoch,
                    doc.recall_count,
                    doc.last_recalled_epoch,
                    doc.last_recalled_at,
                    *_ranked_values(doc, owner),
                    doc.embedding,
                )
            )
            continue
        doc_key, old_digest, old_length = known
        tagged.append((doc_key, doc))
        length = old_length
        if rebuild or digest != old_digest:
            terms, length = document_terms(doc.text)
            stale.append(doc_key)
            postings.extend((key, term, doc_key, tf, length) for term, tf in terms.items())
            added_length += length - old_length
        doc_updates.append(
            (digest, length, doc.epoch, *_ranked_values(doc, owner), doc.embedding, key, doc_key)
        )
        if doc.replace_counts:
            count_updates.append(
                (doc.recall_count, doc.last_recalled_epoch, doc.last_recalled_at, key, doc_key)
            )
    tx.many(
        "UPDATE index_docs SET text_hash = ?, length = ?, epoch = ?, doc_text = ?, stamp = ?, "
        "significance = ?, valence = ?, episode = ?, embedding = ? "
        "WHERE user_key = ? AND doc_key = ?",
        doc_updates,
    )
    tx.many(
        "UPDATE index_docs SET recall_count = ?, last_recalled_epoch = ?, last_recalled_at = ? "
        "WHERE user_key = ? AND doc_key = ?",
        count_updates,
    )
    _delete_postings(tx, key, stale)
    _changed(tx, key, [*stale, *(int(new_row[1]) for new_row in new_rows)])
    tx.many(
        "INSERT INTO index_docs (user_key, doc_key, memory_id, text_hash, length, epoch, "
        "recall_count, last_recalled_epoch, last_recalled_at, doc_text, stamp, significance, "
        "valence, episode, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        new_rows,
    )
    tx.many(
        "INSERT INTO index_postings (user_key, term, doc_key, tf, length) VALUES (?, ?, ?, ?, ?)",
        postings,
    )
    _put_tags(tx, key, tagged)
    turns = [
        (key, int(new_row[1]), turn)
        for new_row, doc in zip(new_rows, fresh, strict=True)
        for turn in dict.fromkeys(doc.turns)
    ]
    tx.many(
        "INSERT INTO index_recalls (user_key, doc_key, turn_id) VALUES (?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        turns,
    )
    tx.run(
        "UPDATE index_users SET doc_count = doc_count + ?, total_length = total_length + ? "
        "WHERE user_key = ?",
        (len(fresh), added_length, key),
    )


def remove_docs(tx: Tx, key: int, ids: Sequence[str]) -> list[str]:
    """Remove the memories ``ids`` of user ``key`` from the index; the ids it held."""
    existing = _existing(tx, key, list(dict.fromkeys(ids)))
    if not existing:
        return []
    doc_keys = [doc_key for doc_key, _, _ in existing.values()]
    _delete_postings(tx, key, doc_keys)
    _changed(tx, key, doc_keys)
    for part in in_chunks(doc_keys):
        marks = placeholders(len(part))
        tx.run(
            f"DELETE FROM index_recalls WHERE user_key = ? AND doc_key IN ({marks})", (key, *part)
        )
        tx.run(
            f"DELETE FROM index_tags WHERE user_key = ? AND doc_key IN ({marks})", (key, *part)
        )
        tx.run(f"DELETE FROM index_docs WHERE user_key = ? AND doc_key IN ({marks})", (key, *part))
    removed_length = sum(length for _, _, length in existing.values())
    tx.run(
        "UPDATE index_users SET doc_count = doc_count - ?, total_length = total_length - ? "
        "WHERE user_key = ?",
        (len(existing), removed_length, key),
    )
    return list(existing)
