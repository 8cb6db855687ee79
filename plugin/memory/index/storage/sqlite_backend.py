"""The index in SQLite: a file (WAL, short transactions, flock user locks) or in memory.

A file serves the processes of one host: readers never wait (WAL), a writer takes the file's
write lock with ``BEGIN IMMEDIATE`` for one short transaction. Its connections are the state
store's pool too (``affect_memory.db.sqlite_connections``). Durability is the state
store's: WAL with ``synchronous=NORMAL``, so a commit survives the process being killed; an
OS crash or power cut may roll back the last commits (never half of one), after which
``MemoryIndex.sync()`` re-checks every user against Chroma. User locks are ``flock``s on one
small file per user in ``<index>.locks/``, released by the kernel when their process dies.

``":memory:"`` is one in-memory database per process, shared by every in-memory index of the
process while one is open (like Chroma's in-process store, which it mirrors), used through
one connection under a lock; its user locks are thread locks.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from affect_memory.db.file_locks import FileLocks, release
from affect_memory.db.sqlite_connections import SQLiteConnections, transaction
from affect_memory.errors import StoreError, StoreUnavailableError
from affect_memory.kernel.errors import AffectMemoryError, StateStoreError
from affect_memory.memory.index.storage.backend import BackendKind
from affect_memory.memory.index.storage.schema import migrate, placeholders

__all__ = ["SQLiteBackend"]

_T = TypeVar("_T")

BUSY_TIMEOUT = 30.0
"""Seconds a writer waits for SQLite's write lock before the write fails."""


class _SQLiteTx:
    """A ``Tx`` over one SQLite connection."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._connection.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._connection.execute(sql, params).fetchone()
        return row

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._connection.execute(sql, params).rowcount

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        if params:
            self._connection.executemany(sql, params)

    def existing_tables(self, names: Sequence[str]) -> set[str]:
        found = self._connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
            f"({placeholders(len(names))})",
            list(names),
        ).fetchall()
        return {name for (name,) in found}


class _SharedMemory:
    """The process's one in-memory index database, its connection and its user locks."""

    def __init__(self) -> None:
        self.connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.guard = threading.RLock()
        self.locks: dict[str, threading.Lock] = {}
        self.holders = 0

    def user_lock(self, name: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(name, threading.Lock())


class SQLiteBackend:
    """A memory index in a SQLite file, or (``path=None``) in the process's memory."""

    kind: BackendKind = "sqlite"

    _shared: ClassVar[_SharedMemory | None] = None
    _shared_guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path | None) -> None:
        """Open (creating and migrating) the index at ``path``, or the in-memory one."""
        self._path = path
        self._closed = False
        self._memory: _SharedMemory | None = None
        self._db: SQLiteConnections | None = None
        self._lock_files: FileLocks | None = None
        if path is None:
            with SQLiteBackend._shared_guard:
                if SQLiteBackend._shared is None:
                    SQLiteBackend._shared = _SharedMemory()
                self._memory = SQLiteBackend._shared
                self._memory.holders += 1
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreUnavailableError(
                    f"cannot create the memory index's directory {path.parent}: {error}"
                ) from None
            self._lock_files = FileLocks(
                path.with_name(path.name + ".locks"),
                hint=f"check that {path.parent} is writable",
            )
            self._db = SQLiteConnections(
                path,
                busy_timeout=BUSY_TIMEOUT,
                synchronous="NORMAL",
                refused=lambda error: StoreUnavailableError(
                    f"cannot open the memory index {path}: {error}"
                ),
            )
        try:
            self.write(lambda tx: migrate(tx, where=self.describe()))
        except BaseException:
            self.close()
            raise

    def describe(self) -> str:
        """The index file, or ``:memory:``."""
        return ":memory:" if self._path is None else str(self._path)

    # ---------------------------------------------------------------- connections

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise StoreError(f"the memory index {self.describe()} is closed")
        if self._memory is not None:
            with self._memory.guard:
                yield self._memory.connection
            return
        assert self._db is not None
        with self._db.connection() as connection:
            yield connection

    def _transaction(self, immediate: bool, work: Callable[[_SQLiteTx], _T]) -> _T:
        with self._connection() as connection:
            try:
                with transaction(connection, immediate=immediate):
                    return work(_SQLiteTx(connection))
            except AffectMemoryError:
                raise
            except sqlite3.Error as error:
                raise StoreError(f"memory index {self.describe()}: {error}") from error

    def read(self, work: Callable[[_SQLiteTx], _T]) -> _T:
        """``work`` in one deferred transaction: one snapshot (WAL), never waiting for writers
        of a file (the in-memory database serialises reads and writes)."""
        return self._transaction(False, work)

    def write(self, work: Callable[[_SQLiteTx], _T]) -> _T:
        """``work`` in one ``BEGIN IMMEDIATE`` transaction."""
        return self._transaction(True, work)

    # ---------------------------------------------------------------- user locks

    @contextmanager
    def lock(self, name: str, *, timeout: float) -> Iterator[None]:
        """Hold user lock ``name``, waiting at most ``timeout`` seconds."""
        if self._memory is not None:
            held = self._memory.user_lock(name)
            if not held.acquire(timeout=timeout):
                raise StoreError(_busy(name, timeout))
            try:
                yield
            finally:
                held.release()
            return
        assert self._lock_files is not None
        try:
            fd = self._lock_files.hold(
                self._lock_files.path_for(name), timeout=timeout, what=f"the writer lock of {name}"
            )
        except StateStoreError as error:
            raise StoreError(f"{_busy(name, timeout)} ({error})") from None
        try:
            yield
        finally:
            release(fd)

    @contextmanager
    def try_lock(self, name: str) -> Iterator[bool]:
        """Hold user lock ``name`` for the block if nobody does; the block gets whether."""
        if self._memory is not None:
            held = self._memory.user_lock(name)
            got = held.acquire(blocking=False)
            try:
                yield got
            finally:
                if got:
                    held.release()
            return
        assert self._lock_files is not None
        fd = self._lock_files.lock(self._lock_files.path_for(name), wait=False)
        try:
            yield fd is not None
        finally:
            if fd is not None:
                release(fd)

    def close(self) -> None:
        """Close this index's connections (the in-memory one when its last holder closes)."""
        if self._closed:
            return
        self._closed = True
        if self._memory is not None:
            with SQLiteBackend._shared_guard:
                self._memory.holders -= 1
                if self._memory.holders == 0 and SQLiteBackend._shared is self._memory:
                    SQLiteBackend._shared = None
                    with suppress(sqlite3.Error):
                        self._memory.connection.close()
            return
        if self._db is not None:
            self._db.close()


def _busy(name: str, timeout: float) -> str:
    return (
        f"the memories of {name} stayed locked by another writer for {timeout:g} s (a write in "
        "another process or thread still running, or a very slow Chroma server)"
    )

