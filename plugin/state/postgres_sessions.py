"""The PostgreSQL store's sessions: a pool of connections, and conversation locks held on them.

A turn holds its conversation with a *session-level* advisory lock (``pg_advisory_lock`` on
``conversation_lock_key``), taken on a connection the turn leases from the pool for its whole
length and given back (unlocked) when the turn ends. Waiting is bounded: turns of one
conversation in one process queue on an in-process gate (so waiters do not each hold a pooled
connection), then on the server lock with ``lock_timeout`` set to what is left of the store's
``lock_timeout``; past it ``LockTimeoutError`` names the conversation and the timeout. An idle
pooled connection the server dropped is replaced before a failure is called real.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from affect_memory.db.postgres_connections import (
    Connection,
    cancel_quietly,
    one_line,
    open_pool,
    set_lock_timeout,
)
from affect_memory.errors import LockTimeoutError
from affect_memory.kernel.errors import StateStoreError, shown
from affect_memory.state.common import when_done
from affect_memory.state.postgres_schema import Statements

__all__ = [
    "HELD_ELSEWHERE",
    "Attempt",
    "ConnectionLostError",
    "Lease",
    "Sessions",
    "conversation_lock_key",
]

_T = TypeVar("_T")

HELD_ELSEWHERE = (
    "another turn holds it (a worker still in that turn, or one on a host whose connection "
    "has not dropped yet)"
)


class ConnectionLostError(StateStoreError):
    """The connection holding a conversation dropped, and with it the conversation's lock."""


def conversation_lock_key(schema: str, conversation_id: str) -> int:
    """The signed 64-bit advisory lock key of a conversation in a schema.

    The first eight bytes of SHA-256 over ``schema NUL conversation_id``: stable across
    processes, hosts and Python versions (unlike ``hash``), and distinct per schema so two
    deployments in one database never wait on each other.
    """
    digest = hashlib.sha256(f"{schema}\x00{conversation_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Attempt:
    """One acquisition of a conversation lock, which its waiter may abandon (cancellation)."""

    def __init__(self) -> None:
        """An attempt no one has abandoned yet."""
        self._guard = threading.Lock()
        self._waiting: Connection | None = None
        self.abandoned = False

    def wait_on(self, connection: Connection | None) -> None:
        """Record the connection now blocked on the lock; raise if the waiter already left."""
        with self._guard:
            if self.abandoned:
                raise asyncio.CancelledError
            self._waiting = connection

    def abandon(self) -> None:
        """Mark the attempt abandoned and interrupt a server-side lock wait."""
        with self._guard:
            self.abandoned = True
            waiting = self._waiting
        if waiting is not None:
            threading.Thread(
                target=cancel_quietly, args=(waiting,), name="affect-memory-pg-cancel"
            ).start()


@dataclass
class Lease:
    """A pooled connection holding one conversation's session advisory lock."""

    connection: Connection
    key: int


class Sessions:
    """The pooled sessions of one store, the locks its turns hold on them, and the threads that
    run their statements."""

    def __init__(
        self,
        url: str,
        kwargs: dict[str, Any],
        *,
        schema: str,
        display: str,
        statements: Statements,
        lock_timeout: float,
        pool_size: int,
    ) -> None:
        """A pool of up to ``pool_size`` sessions to ``url``."""
        self._schema = schema
        self._display = display
        self._backing = f"{display}#{schema}"
        self._statements = statements
        self._lock_timeout = lock_timeout
        self._closed = False
        self._gates: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._gates_guard = threading.Lock()
        self._pool: ConnectionPool[Connection] = open_pool(
            url, kwargs, name=f"affect-memory:{schema}", timeout=lock_timeout, pool_size=pool_size
        )
        self._pool_size = pool_size
        self.work = concurrent.futures.ThreadPoolExecutor(
            max_workers=pool_size, thread_name_prefix="affect-memory-pg"
        )
        """Calls on a connection a turn already holds: never waits for a lock or the pool."""
        self._waits = concurrent.futures.ThreadPoolExecutor(
            max_workers=pool_size + 2, thread_name_prefix="affect-memory-pg-wait"
        )
        # Calls that wait for a pooled connection or a conversation lock.

    def close(self) -> None:
        """Close the pool and its threads; nothing can run afterwards."""
        self._closed = True
        self._waits.shutdown(wait=True)
        self.work.shutdown(wait=True)
        self._pool.close()

    def check_open(self) -> None:
        """Refuse to work once the store is closed."""
        if self._closed:
            raise StateStoreError(f"the store on {self._backing} is closed")

    def gate(self, conversation_id: str) -> asyncio.Lock:
        """This process's queue for a conversation (per event loop): one waiter at the server."""
        key = (id(asyncio.get_running_loop()), conversation_id)
        with self._gates_guard:
            gate = self._gates.get(key)
            if gate is None:
                gate = asyncio.Lock()
                self._gates[key] = gate
            return gate

    async def acquire(self, conversation_id: str, gate: asyncio.Lock) -> Lease:
        """Lease a connection holding the conversation's advisory lock, within the timeout."""
        deadline = time.monotonic() + self._lock_timeout
        try:
            async with asyncio.timeout(self._lock_timeout):
                await gate.acquire()
        except TimeoutError:
            raise LockTimeoutError(
                conversation_id, self._lock_timeout, "another turn of this process holds it"
            ) from None
        try:
            attempt = Attempt()
            key = conversation_lock_key(self._schema, conversation_id)
            future = self.submit(
                self._waits, lambda: self._lease(conversation_id, key, deadline, attempt)
            )
            try:
                connection = await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                attempt.abandon()
                future.add_done_callback(self._discard_if_leased)
                raise
            return Lease(connection, key)
        except BaseException:
            gate.release()
            raise

    def _lease(
        self, conversation_id: str, key: int, deadline: float, attempt: Attempt
    ) -> Connection:
        """In a waiting thread: a pooled connection, then the lock (fast try, then a wait)."""
        connection, acquired = self._first_statement(
            f"conversation {shown(conversation_id)}",
            "lock",
            deadline,
            lambda c: bool(c.execute(self._statements.try_lock, (key,)).fetchone()[0]),  # type: ignore[index]
        )
        try:
            if not acquired:
                attempt.wait_on(connection)
                try:
                    self._wait_for_lock(connection, conversation_id, key, deadline)
                finally:
                    attempt.wait_on(None)
            attempt.wait_on(None)  # raises if the waiter left meanwhile
        except BaseException:
            self._discard(connection)
            raise
        return connection

    def _wait_for_lock(
        self, connection: Connection, conversation_id: str, key: int, deadline: float
    ) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LockTimeoutError(conversation_id, self._lock_timeout, HELD_ELSEWHERE)
        try:
            # A session lock taken inside a transaction outlives it; SET LOCAL ends with it.
            with connection.transaction():
                set_lock_timeout(connection, remaining)
                connection.execute(self._statements.lock, (key,))
        except pg_errors.LockNotAvailable:
            raise LockTimeoutError(conversation_id, self._lock_timeout, HELD_ELSEWHERE) from None
        except pg_errors.QueryCanceled:
            raise asyncio.CancelledError from None
        except psycopg.Error as error:
            raise self.failure(
                connection, f"conversation {shown(conversation_id)}", "wait for", error
            ) from error

    def _first_statement(
        self, subject: str, what: str, deadline: float, work: Callable[[Connection], _T]
    ) -> tuple[Connection, _T]:
        """Run ``work`` on a pooled connection; a connection the server had closed is replaced."""
        # Every idle pooled connection may be one the server dropped (a restart, an idle
        # timeout): try past all of them before calling the failure real.
        attempts = self._pool_size + 1
        for attempt in range(1, attempts + 1):
            try:
                connection = self._pool.getconn(timeout=max(0.001, deadline - time.monotonic()))
            except PoolTimeout:
                raise StateStoreError(
                    f"no PostgreSQL connection to {what} {subject} within "
                    f"{self._lock_timeout:g} s: all {self._pool_size} pooled connections are "
                    f"busy, or {self._display} does not answer"
                ) from None
            try:
                return connection, work(connection)
            except psycopg.Error as error:
                broken = connection.broken
                self._pool.putconn(connection)
                if broken and attempt < attempts:
                    continue  # the pool handed out a connection the server had dropped
                raise self.failure(connection, subject, what, error) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _discard_if_leased(self, future: concurrent.futures.Future[Connection]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._discard(future.result())

    def _discard(self, connection: Connection) -> None:
        """Close a connection (freeing any lock its session holds) and hand it back dead."""
        with suppress(Exception):
            connection.close()
        with suppress(Exception):
            self._pool.putconn(connection)

    def _release(self, lease: Lease) -> None:
        """Unlock and return the connection; anything unexpected closes it instead."""
        connection = lease.connection
        try:
            if not connection.closed and not connection.broken:
                row = connection.execute(self._statements.unlock, (lease.key,)).fetchone()
                idle = connection.info.transaction_status == TransactionStatus.IDLE
                if row is not None and row[0] is True and idle:
                    self._pool.putconn(connection)
                    return
        except Exception:  # closing below releases the lock, whatever failed
            pass
        self._discard(connection)

    def release_when_done(
        self, lease: Lease, work: Sequence[concurrent.futures.Future[Any]]
    ) -> concurrent.futures.Future[None]:
        """Release once every call of the holder has finished (a cancelled commit may run on)."""
        released: concurrent.futures.Future[None] = concurrent.futures.Future()

        def release() -> None:
            try:
                self.work.submit(self._release, lease).add_done_callback(
                    lambda _: released.set_result(None)
                )
            except RuntimeError:  # the store was closed meanwhile
                self._discard(lease.connection)
                released.set_result(None)

        when_done(work, release)
        return released

    def submit(
        self, executor: concurrent.futures.ThreadPoolExecutor, work: Callable[[], _T]
    ) -> concurrent.futures.Future[_T]:
        """Run ``work`` on ``executor``; a closed store raises ``StateStoreError``."""
        self.check_open()
        try:
            return executor.submit(work)
        except RuntimeError as error:  # shut down concurrently
            raise StateStoreError(f"the store on {self._backing} is closed") from error

    async def pooled(
        self, work: Callable[[Connection], _T], what: str, subject: str = "the state store"
    ) -> _T:
        """Run ``work`` on any pooled connection (calls that need no conversation lock: the
        outbox, user links, erasure, history); an error says it could not ``what`` ``subject``."""
        deadline = time.monotonic() + self._lock_timeout

        def call() -> _T:
            connection, result = self._first_statement(subject, what, deadline, work)
            self._pool.putconn(connection)
            return result

        return await asyncio.wrap_future(self.submit(self._waits, call))

    def failure(
        self, connection: Connection, subject: str, what: str, error: BaseException
    ) -> StateStoreError:
        """A driver error as a store error naming what was being done to which subject."""
        if connection.broken or connection.closed:
            return ConnectionLostError(
                f"lost the PostgreSQL connection while trying to {what} {subject} "
                f"({one_line(error)}); a conversation it held is released, start the turn again"
            )
        return StateStoreError(
            f"PostgreSQL could not {what} {subject} in schema {self._schema!r}: {one_line(error)}"
        )

