"""A SQLite store's connections: a pool used from worker threads, and short write transactions.

Every connection is in WAL mode with the store's ``synchronous`` setting and busy timeout. A
write is one ``BEGIN IMMEDIATE`` transaction, queued on an OS lock first (for at most the busy
timeout): SQLite's own busy handler polls with sleeps of a millisecond or more, a kernel lock
wakes the next writer at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Literal, TypeVar

from affect_memory.kernel.errors import StateStoreError
from affect_memory.state.file_locks import FileLocks

__all__ = ["SQLiteConnections"]

_T = TypeVar("_T")


class SQLiteConnections:
    """The pooled connections and worker threads of one SQLite file."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float,
        synchronous: Literal["NORMAL", "FULL"],
        locks: FileLocks,
        write_lock: str,
        hint: str,
    ) -> None:
        """Connections to ``path``; writers queue on the file lock ``write_lock``."""
        self._path = path
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._locks = locks
        self._write_lock = write_lock
        self._hint = hint
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all: list[sqlite3.Connection] = []
        self._all_guard = threading.Lock()
        self.closed = False
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(8, (os.cpu_count() or 1) + 4),
            thread_name_prefix="affect-memory-sqlite",
        )

    def check_open(self) -> None:
        """Refuse to work once closed."""
        if self.closed:
            raise StateStoreError(f"the store on {self._path} is closed")

    def close(self) -> None:
        """Wait for running calls, then close every connection."""
        self.closed = True
        self._executor.shutdown(wait=True)
        with self._all_guard:
            connections, self._all = self._all, []
        for connection in connections:
            with suppress(sqlite3.Error):
                connection.close()

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            connection.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as error:
            raise StateStoreError(f"cannot open {self._path}: {error}; {self._hint}") from error
        with self._all_guard:
            self._all.append(connection)
        return connection

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A pooled connection for one call, used by one thread at a time."""
        try:
            connection = self._idle.get_nowait()
        except queue.Empty:
            connection = self._connect()
        try:
            yield connection
        finally:
            if self.closed:
                with suppress(sqlite3.Error):
                    connection.close()
            else:
                self._idle.put(connection)

    def _call(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` on a pooled connection; a SQLite error becomes a ``StateStoreError``."""
        with self.connection() as connection:
            try:
                return work(connection)
            except sqlite3.Error as error:
                raise StateStoreError(
                    f"SQLite error on {self._path}: {error}; {self._hint}"
                ) from error

    def submit(self, work: Callable[[sqlite3.Connection], _T]) -> concurrent.futures.Future[_T]:
        """Run ``work`` on a pooled connection in the store's worker threads."""
        self.check_open()
        try:
            return self._executor.submit(self._call, work)
        except RuntimeError as error:  # shut down concurrently
            raise StateStoreError(f"the store on {self._path} is closed") from error

    async def run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` in a worker thread and wait for it without blocking the event loop."""
        return await asyncio.wrap_future(self.submit(work))

    @contextmanager
    def write(self, connection: sqlite3.Connection) -> Iterator[None]:
        """A short ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back otherwise.

        Writers of this store queue on an OS lock first: SQLite's own busy handler polls with
        sleeps of a millisecond or more, a kernel lock wakes the next writer at once. The queue
        is bounded by the busy timeout too, as SQLite's own wait is.
        """
        fd = self._locks.hold(
            self._write_lock,
            timeout=self._busy_timeout,
            what=f"the write lock of {self._path} (busy_timeout)",
        )
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            os.close(fd)  # closing the only descriptor releases the lock
