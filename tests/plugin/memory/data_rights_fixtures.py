"""Shared setup of the data-rights tests: two users holding the same memory ids, with recall
counts, in a real embedded Chroma store over a SQLite or PostgreSQL index, and the checks that
nothing of an erased user is left."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from affect_memory.memory.index.storage.schema import TABLES
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.state.postgres_fixture import server_url, temporary_schema

USER_A = "ann"
USER_B = "bob"
IDS = ("m1", "m2", "m3", "m4", "m5")


def records_of(user_id: str) -> list[dict[str, Any]]:
    """Five memories of ``user_id`` under the shared ids, texts of their own."""
    return [
        {
            "id": ident,
            "text": f"{user_id} memory {ident}: I keep bees on the roof number {number}.",
            "user_id": user_id,
            "timestamp": f"2026-0{1 + number % 3}-1{number}T08:30:00Z",
            "significance": round(0.1 + 0.15 * number, 3),
            "emotional_valence": -0.5 + 0.2 * number,
            "episode": number % 2 == 0,
            "conversation_id": f"{user_id}-chat",
            "extra": {"source": "test", "rank": number, "fine": number / 3},
        }
        for number, ident in enumerate(IDS)
    ]


def seed(memory: ChromaMemory) -> None:
    """Both users' memories, and recall counts that differ per user and memory."""
    memory.add([*records_of(USER_A), *records_of(USER_B)])
    memory.apply_turn_writes(
        "t1", user_id=USER_A, recalled_ids=["m1", "m2"], recalled_at="2026-05-01T10:00:00Z"
    )
    memory.apply_turn_writes(
        "t2", user_id=USER_A, recalled_ids=["m1"], recalled_at="2026-05-02T11:00:00.123456Z"
    )
    memory.apply_turn_writes(
        "t1", user_id=USER_B, recalled_ids=["m3"], recalled_at="2026-05-03T12:00:00Z"
    )


def snapshot(memory: ChromaMemory, user_id: str) -> dict[str, MemoryRecord]:
    """Every record of ``user_id`` as ``get`` returns it (the index's counts), by id."""
    return {record.id: record for record in memory.get(IDS, user_id=user_id)}


@contextmanager
def index_setting(kind: str, tmp_path: Path) -> Iterator[str | None]:
    """The ``index=`` of a store: its default SQLite file, or a PostgreSQL schema of its own."""
    if kind == "sqlite":
        yield None
        return
    url = server_url()
    with temporary_schema(url) as schema:
        yield f"{url}?schema={schema}"


def open_store(path: Path, index: str | None, embedder: Embedder) -> ChromaMemory:
    """An embedded store at ``path`` over ``index``."""
    return ChromaMemory(path, index=index, embedder=embedder)


def index_rows_of(memory: ChromaMemory, user_id: str) -> dict[str, int]:
    """How many rows each index table holds of ``user_id`` (their key)."""
    key, _ = memory.index.user_key(user_id)
    counts: dict[str, int] = {}
    for table in TABLES:
        row = memory.index.backend.read(
            lambda tx, table=table: tx.one(
                f"SELECT COUNT(*) FROM {table} WHERE user_key = ?", (key,)
            )
        )
        counts[table] = int(row[0]) if row else 0
    return counts


def assert_no_trace(memory: ChromaMemory, user_id: str) -> None:
    """Nothing of ``user_id`` in Chroma (collection, stats, reads) or in any index table."""
    name = memory.collection_for(user_id)
    assert name not in {c.name for c in memory._collections.listed()}
    assert memory.count(user_id) == 0
    assert user_id not in memory.stats().users
    assert memory.get(IDS, user_id=user_id) == ()
    assert memory.list(user_id) == ()
    assert list(memory.export(user_id)) == []
    assert memory.recall("bees on the roof", user_id, now="2026-06-01T00:00:00Z").results == ()
    assert index_rows_of(memory, user_id) == dict.fromkeys(TABLES, 0)


def segment_dirs(path: Path, memory: ChromaMemory, user_id: str) -> list[Path]:
    """The segment directories an embedded store keeps for ``user_id``'s collection now."""
    from affect_memory.memory.erasure import _segment_ids

    return [
        path / segment
        for segment in _segment_ids(path, memory.collection_for(user_id))
        if (path / segment).is_dir()
    ]
