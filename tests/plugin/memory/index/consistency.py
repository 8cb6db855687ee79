"""Checks that a store's memory index holds exactly what its Chroma collections hold."""

from __future__ import annotations

from typing import Any

from plugin.memory.index.documents import text_hash
from plugin.memory.location import open_client, parse_location
from plugin.memory.store import ChromaMemory


def chroma_texts(memory: ChromaMemory, user_id: str) -> dict[str, str]:
    """Memory id -> text hash of what ``user_id``'s collection holds, read by a raw client."""
    client, lock = open_client(parse_location(memory.location))
    if lock is not None:
        lock.release()  # the memory's own hold keeps an embedded store locked
    try:
        collection = client.get_collection(memory.collection_for(user_id))
    except Exception:  # no collection: the user has no memories
        return {}
    held: dict[str, str] = {}
    offset = 0
    while True:
        got: dict[str, Any] = collection.get(include=["documents"], limit=1000, offset=offset)
        for ident, text in zip(got["ids"], got["documents"], strict=True):
            held[ident] = text_hash(text)
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
        stored = chroma_texts(memory, user)
        assert audit.pending == 0, f"{user}: {audit.pending} journal entries left"
        missing = sorted(set(stored) - set(audit.texts))
        extra = sorted(set(audit.texts) - set(stored))
        assert not missing and not extra, f"{user}: index lacks {missing}, has extra {extra}"
        changed = sorted(i for i in stored if stored[i] != audit.texts[i])
        assert not changed, f"{user}: the index has other texts for {changed}"
        assert audit.doc_count == audit.counted_docs == len(stored), user
        assert audit.total_length == audit.counted_length, user
        assert audit.postings_ok, user
        sizes[user] = len(stored)
    return sizes
