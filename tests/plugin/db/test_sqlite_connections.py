"""The one SQLite pool: transactions whole or not at all, idle connections capped at the pool
size, open failures in the owner's words, reads through a memory map."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from affect_memory.db import DEFAULT_POOL_SIZE
from affect_memory.db.file_locks import FileLocks
from affect_memory.db.sqlite_connections import MMAP_BYTES, SQLiteConnections, transaction
from affect_memory.errors import StoreUnavailableError


def _pool(
    path: Path,
    *,
    write_lock: tuple[FileLocks, str] | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> SQLiteConnections:
    return SQLiteConnections(
        path,
        busy_timeout=5.0,
        synchronous="NORMAL",
        refused=lambda error: StoreUnavailableError(f"cannot open {path}: {error}"),
        write_lock=write_lock,
        pool_size=pool_size,
    )


def test_a_transaction_commits_whole_or_rolls_back(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "a.db")
    try:
        with pool.connection() as connection:
            connection.execute("CREATE TABLE t (x INTEGER)")
            with transaction(connection, immediate=True):
                connection.execute("INSERT INTO t VALUES (1)")
            with pytest.raises(RuntimeError), transaction(connection, immediate=True):
                connection.execute("INSERT INTO t VALUES (2)")
                raise RuntimeError("fail")
            assert not connection.in_transaction
            with transaction(connection, immediate=False):
                assert connection.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        pool.close()


def test_a_write_queues_on_the_write_lock_when_given(tmp_path: Path) -> None:
    locks = FileLocks(tmp_path / "locks", hint="check the disk")
    (tmp_path / "locks").mkdir()
    pool = _pool(tmp_path / "a.db", write_lock=(locks, str(tmp_path / "locks" / "write.lock")))
    try:
        with pool.connection() as connection:
            with pool.write(connection):
                connection.execute("CREATE TABLE t (x INTEGER)")
            assert pool.submit(lambda c: c.execute("SELECT count(*) FROM t").fetchone()).result()
    finally:
        pool.close()


def test_idle_connections_are_capped_at_the_pool_size(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "a.db", pool_size=2)
    opened: list[sqlite3.Connection] = []
    barrier = threading.Barrier(4)

    def hold() -> None:
        with pool.connection() as connection:
            opened.append(connection)
            barrier.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    try:
        assert len(set(map(id, opened))) == 4
        assert pool._idle.qsize() == 2
        assert DEFAULT_POOL_SIZE == 10
    finally:
        pool.close()


def test_a_file_that_cannot_be_opened_is_refused_in_the_owners_words(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "missing-dir" / "a.db")
    with pytest.raises(StoreUnavailableError, match=r"^cannot open .*a\.db: "), pool.connection():
        pass
    pool.close()


def test_every_connection_reads_through_a_memory_map_and_sees_other_writers(
    tmp_path: Path,
) -> None:
    """Reads go through the map (``MMAP_BYTES``), and a row another connection committed
    through the WAL is read at once, the map notwithstanding."""
    pool = _pool(tmp_path / "m.db")
    try:
        with pool.connection() as reader:
            assert reader.execute("PRAGMA mmap_size").fetchone() == (MMAP_BYTES,)
            reader.execute("CREATE TABLE t (x INTEGER)")
            writer = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
            try:
                writer.execute("INSERT INTO t VALUES (7)")
            finally:
                writer.close()
            assert reader.execute("SELECT x FROM t").fetchall() == [(7,)]
    finally:
        pool.close()
