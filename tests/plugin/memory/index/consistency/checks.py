"""Checks that a store's memory index holds exactly what its Chroma collections hold."""

from __future__ import annotations

from typing import Any

import numpy as np

from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.chroma.rows import row_problem
from affect_memory.memory.index.consistency.documents import text_hash
from affect_memory.memory.store import ChromaMemory


def same_embedding(held: bytes | None, chroma: Any) -> bool:
    """Whether the index's embedding is Chroma's, value for value: float32 bytes of an
    embedded client's vector, float64 of an HTTP client's (parsed from decimals)."""
    if held is None:
        return False
    vector = np.asarray(chroma, dtype=np.float64)
    if len(held) == 4 * len(vector):
        return bool(np.array_equal(np.frombuffer(held, "<f4"), vector.astype(np.float32)))
    return len(held) == 8 * len(vector) and bool(np.array_equal(np.frombuffer(held, "<f8"), vector))


def chroma_texts(memory: ChromaMemory, user_id: str) -> dict[str, str]:
    """Memory id -> text hash of what ``user_id``'s collection holds, read by a raw client."""
    return {ident: text_hash(text) for ident, (text, _) in chroma_rows(memory, user_id).items()}


def expected_ranked(user_id: str, text: Any, meta: Any) -> tuple[Any, ...]:
    """The ranked fields the index must hold for a Chroma row: its own, or all NULL for a row
    ranking could not score (which recall then reads, and skips, from Chroma)."""
    if not isinstance(meta, dict) or row_problem(text, meta) or meta["user_id"] != user_id:
        return (None,) * 5
    return (
        text,
        meta["timestamp"],
        float(meta["significance"]),
        float(meta["emotional_valence"]),
        meta["episode"],
    )


def chroma_rows(memory: ChromaMemory, user_id: str) -> dict[str, tuple[Any, Any]]:
    """Memory id -> (document, metadata) of ``user_id``'s collection, read by a raw client."""
    return {
        ident: (text, meta)
        for ident, (text, meta, _) in _chroma_rows(memory, user_id, with_vectors=False).items()
    }


def chroma_embeddings(memory: ChromaMemory, user_id: str) -> dict[str, Any]:
    """Memory id -> embedding of ``user_id``'s collection, read by a raw client."""
    return {
        ident: vector
        for ident, (_, _, vector) in _chroma_rows(memory, user_id, with_vectors=True).items()
    }


def _chroma_rows(
    memory: ChromaMemory, user_id: str, *, with_vectors: bool
) -> dict[str, tuple[Any, Any, Any]]:
    client, lock = open_client(parse_location(memory.location))
    if lock is not None:
        lock.release()  # the memory's own hold keeps an embedded store locked
    try:
        collection = client.get_collection(memory.collection_for(user_id))
    except Exception:  # no collection: the user has no memories
        return {}
    held: dict[str, tuple[Any, Any, Any]] = {}
    offset = 0
    include = ["documents", "metadatas", *(["embeddings"] if with_vectors else [])]
    while True:
        got: dict[str, Any] = collection.get(include=include, limit=1000, offset=offset)
        vectors = got["embeddings"] if with_vectors else [None] * len(got["ids"])
        for ident, text, meta, vector in zip(
            got["ids"], got["documents"], got["metadatas"], vectors, strict=True
        ):
            held[ident] = (text, meta, vector)
        offset += len(got["ids"])
        if len(got["ids"]) < 1000:
            return held


def assert_consistent(memory: ChromaMemory, users: tuple[str, ...]) -> dict[str, int]:
    """Every user's index equals their collection (ids and texts), with exact totals and no
    journal entry left; returns how many memories each user has."""
    sizes: dict[str, int] = {}
    for user in users:
        memory.index.newest_epoch(user)  # a user's first read settles what a writer left
        audit = memory.index.audit(user)
        held = _chroma_rows(memory, user, with_vectors=True)  # one read of the collection
        rows = {ident: (text, meta) for ident, (text, meta, _) in held.items()}
        vectors = {ident: vector for ident, (_, _, vector) in held.items()}
        stored = {ident: text_hash(text) for ident, (text, _) in rows.items()}
        assert audit.pending == 0, f"{user}: {audit.pending} journal entries left"
        missing = sorted(set(stored) - set(audit.texts))
        extra = sorted(set(audit.texts) - set(stored))
        assert not missing and not extra, f"{user}: index lacks {missing}, has extra {extra}"
        changed = sorted(i for i in stored if stored[i] != audit.texts[i])
        assert not changed, f"{user}: the index has other texts for {changed}"
        other = sorted(
            i for i in stored if audit.ranked[i][:5] != expected_ranked(user, *rows[i])
        )
        assert not other, f"{user}: the index has other ranked fields for {other[:5]}"
        epochs = sorted(
            i
            for i in stored
            if audit.ranked[i][0] is not None
            and audit.ranked[i][5] != rows[i][1]["timestamp_epoch"]
        )
        assert not epochs, f"{user}: the index has other epochs for {epochs[:5]}"
        unlike = sorted(i for i in stored if not same_embedding(audit.embeddings[i], vectors[i]))
        assert not unlike, f"{user}: the index has other embeddings for {unlike[:5]}"
        assert audit.doc_count == audit.counted_docs == len(stored), user
        assert audit.total_length == audit.counted_length, user
        assert audit.postings_ok, user
        sizes[user] = len(stored)
    return sizes
