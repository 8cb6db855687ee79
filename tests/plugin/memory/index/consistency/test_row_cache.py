"""The row cache: rows served without reading them again, never older than the snapshot, and
never more of them than its capacity."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from affect_memory.memory.index.consistency.row_cache import ROW_COLUMNS, RowCache
from affect_memory.memory.index.storage.backend import Tx
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class CountingTx:
    """A transaction that counts the statements reading ``index_docs``."""

    def __init__(self, tx: Tx) -> None:
        self.tx = tx
        self.doc_reads = 0

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.doc_reads += "FROM index_docs" in sql
        return self.tx.rows(sql, params)

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self.tx.one(sql, params)


@pytest.fixture
def memory(embedder: Embedder) -> Iterator[ChromaMemory]:
    with ChromaMemory(":memory:", embedder=embedder) as opened:
        opened.add(
            [
                {
                    "id": f"m{i}",
                    "text": f"note number {i} about the garden",
                    "user_id": "ann",
                    "timestamp": (NOW - timedelta(days=i)).isoformat(),
                }
                for i in range(20)
            ]
        )
        yield opened


def _served(memory: ChromaMemory, cache: RowCache, ids: list[str]) -> tuple[dict[str, Any], int]:
    """The cache's rows of ``ids`` and how many reads of the documents it made."""
    key, _ = memory.index.user_key("ann")

    def read(tx: Tx) -> tuple[dict[str, Any], int]:
        counting = CountingTx(tx)
        return cache.rows(counting, key, ids), counting.doc_reads  # type: ignore[arg-type]

    return memory.index.backend.read(read)


def _fresh(memory: ChromaMemory, ids: list[str]) -> dict[str, Any]:
    key, _ = memory.index.user_key("ann")
    marks = ", ".join("?" * len(ids))
    rows = memory.index.backend.read(
        lambda tx: tx.rows(
            f"SELECT {ROW_COLUMNS} FROM index_docs d "
            f"WHERE d.user_key = ? AND d.memory_id IN ({marks})",
            (key, *ids),
        )
    )
    return {row[0]: row for row in rows}


def test_a_small_user_is_read_whole_once_then_served_without_reads(memory: ChromaMemory) -> None:
    cache = RowCache(capacity=400)
    first, reads = _served(memory, cache, ["m1", "m2", "gone"])
    assert reads == 1  # the whole user, in one scan
    assert first == _fresh(memory, ["m1", "m2"])
    again, reads = _served(memory, cache, ["m5", "m2", "m19"])
    assert reads == 0
    assert again == _fresh(memory, ["m5", "m2", "m19"])


def test_a_change_drops_only_the_changed_rows(memory: ChromaMemory) -> None:
    cache = RowCache(capacity=400)
    _served(memory, cache, ["m1"])
    memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m3"], recalled_at=NOW)
    served, reads = _served(memory, cache, ["m1", "m3"])
    assert reads == 1  # m3 alone, read again
    assert served == _fresh(memory, ["m1", "m3"])
    assert served["m3"][1] == 1  # its new recall count


def test_a_large_user_is_read_by_id_and_the_cache_keeps_its_bound(memory: ChromaMemory) -> None:
    cache = RowCache(capacity=8)  # 20 rows: more than a quarter of it
    ids = [f"m{i}" for i in range(12)]
    served, reads = _served(memory, cache, ids)
    assert reads == 1 and served == _fresh(memory, ids)
    assert cache._size <= 8
    again, reads = _served(memory, cache, ids[:4])
    assert again == _fresh(memory, ids[:4])
    assert reads == 0  # the first eight were kept


def test_a_snapshot_older_than_the_cache_reads_around_it(memory: ChromaMemory) -> None:
    cache = RowCache(capacity=400)
    key, _ = memory.index.user_key("ann")
    _served(memory, cache, ["m1"])
    entry = cache._users[key]
    entry.generation += 1  # as if another read had already seen a newer snapshot
    served, reads = _served(memory, cache, ["m1"])
    assert reads == 1 and served == _fresh(memory, ["m1"])
