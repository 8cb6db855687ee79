"""The server state store: conversation state, transcripts and the outbox in PostgreSQL,
shared safely by many worker processes on many hosts.

Locking. A turn holds its conversation with a *session-level* advisory lock
(``pg_advisory_lock`` on :func:`conversation_lock_key`, a stable 64-bit hash of the schema and
the conversation id), taken on a connection the turn leases from the pool for its whole length
and given back (unlocked) when the turn ends. Load and commit run on that same connection as
short transactions of their own: each read is one autocommit statement, the commit one
``BEGIN … COMMIT`` sent as a single pipeline. While the model generates, the connection sits
``idle`` — not ``idle in transaction`` — so no snapshot, row lock or open transaction spans
generation. A transaction-scoped lock (``pg_advisory_xact_lock``, ``SELECT … FOR UPDATE``)
would have to keep a transaction open across generation to last the turn; the session lock
is the deliberate way to hold a conversation for a turn with transactions kept short.

Because the lock belongs to the session, the commit is written on the session that holds it:
if that connection drops (worker killed, network cut, server restart) the server frees the
lock and the dead connection cannot commit either, so no second writer can ever slip in
between a turn's load and its commit. A worker that dies mid-turn closes its socket and the
server ends the session, releasing the conversation at once; for a host that vanishes
without closing its sockets, server-side TCP keepalives set on every session (about 25 s)
end it.

Waiting is bounded: turns of one conversation in one process queue on an in-process gate (so
waiters do not each hold a pooled connection), then on the server lock with ``lock_timeout``
set to what is left of ``lock_timeout`` seconds; past it :class:`LockTimeoutError` names the
conversation and the timeout.

Schema. Every table lives in one configurable PostgreSQL schema (``affect_memory`` by
default), named in every statement, so several deployments or test runs share a database
without meeting. ``schema_version`` records each applied migration; opening a store applies
the missing ones under a transaction-scoped advisory lock, so opening from many processes at
once is safe and opening twice is a no-op. A newer or unknown version is refused in one line.

Durability: a returned commit is a committed PostgreSQL transaction (with the server's
``synchronous_commit``). PostgreSQL text cannot hold NUL characters, so messages,
conversation ids and outbox ids or topics containing one are refused before anything is
written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import math
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "PostgresStateStore needs psycopg 3 and psycopg-pool: pip install 'affect-memory[postgres]'"
    ) from missing

from kernel.adapters.store_support import holding, prepare_commit
from kernel.bounds import check_conversation_id, check_limit
from kernel.errors import CorruptStateError, InvalidInputError, StateStoreError, shown
from kernel.models import AffectState
from kernel.protocols import Message, OutboxItem
from plugin.errors import LockTimeoutError

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "STATE_FORMAT_VERSION",
    "PostgresStateStore",
    "conversation_lock_key",
]

SCHEMA_VERSION = 1
"""The newest migration this module applies and the only schema version it reads."""

STATE_FORMAT_VERSION = 1
"""Version of the ``{"version": ..., "state": ...}`` JSON envelope a state row holds."""

DEFAULT_SCHEMA = "affect_memory"
"""The PostgreSQL schema a store uses unless told otherwise."""

_MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "conversations, messages and outbox",
        (
            "CREATE TABLE {schema}.conversations ("
            " conversation_id text PRIMARY KEY,"
            " state text NOT NULL,"
            " updated_at timestamptz NOT NULL)",
            # seq numbers a conversation's messages 1, 2, 3...; the primary key refuses a
            # second writer of the same position even if locking were ever bypassed.
            "CREATE TABLE {schema}.messages ("
            " conversation_id text NOT NULL,"
            " seq bigint NOT NULL CHECK (seq > 0),"
            " role text NOT NULL CHECK (role IN ('user', 'assistant')),"
            " content text NOT NULL,"
            ' "timestamp" text NOT NULL,'
            " PRIMARY KEY (conversation_id, seq))",
            "CREATE TABLE {schema}.outbox ("
            " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " id text NOT NULL UNIQUE,"
            " topic text NOT NULL,"
            " payload text NOT NULL,"
            " conversation_id text NOT NULL,"
            " applied boolean NOT NULL DEFAULT false,"
            " created_at timestamptz NOT NULL DEFAULT now())",
            "CREATE INDEX outbox_pending ON {schema}.outbox (topic, seq) WHERE NOT applied",
        ),
    ),
)
_TABLES = ("conversations", "messages", "outbox")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MIGRATION_LOCK_CLASS = 0x41464D4D
"""First half of the two-int advisory key that serializes migrations ('AFMM')."""
_SESSION_SETTINGS = {
    # Safety nets, never reached by this store's own short transactions: a session stuck
    # inside a transaction is ended (releasing its conversation), and a peer host that
    # vanished is noticed within about 25 s instead of the kernel's two hours.
    "idle_in_transaction_session_timeout": "60s",
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}

_T = TypeVar("_T")
_Connection = psycopg.Connection[tuple[Any, ...]]


class _ConnectionLostError(StateStoreError):
    """The connection holding a conversation dropped, and with it the conversation's lock."""


def conversation_lock_key(schema: str, conversation_id: str) -> int:
    """The signed 64-bit advisory lock key of a conversation in a schema.

    The first eight bytes of SHA-256 over ``schema NUL conversation_id``: stable across
    processes, hosts and Python versions (unlike ``hash``), and distinct per schema so two
    deployments in one database never wait on each other.
    """
    digest = hashlib.sha256(f"{schema}\x00{conversation_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _one_line(error: BaseException) -> str:
    """A driver error as one line, passwords masked: libpq puts hints on indented lines."""
    text = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    return _redacted(text) or type(error).__name__  # libpq may quote the URL it was given


def _redacted(url: str) -> str:
    """The connection string with any password masked, for error messages."""
    url = re.sub(r"(://[^/@:]*:)[^@/]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", url)


def _check_storable(value: str, name: str) -> None:
    """Refuse text PostgreSQL cannot store: a NUL character, or an unpaired surrogate."""
    if "\x00" in value:
        raise InvalidInputError(
            f"{name} contains a NUL character (\\x00), which PostgreSQL text cannot store: "
            f"{shown(value)}"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"{name} is not valid Unicode text ({error}): {shown(value)}"
        ) from None


@dataclass(frozen=True)
class _Statements:
    """Every statement the store runs, rendered once for its schema."""

    try_lock: str
    lock: str
    unlock: str
    read_state: str
    read_transcript: str
    read_newest: str
    upsert_state: str
    append_messages: str
    add_outbox: str
    pending: str
    complete: str
    version: str

    @classmethod
    def for_schema(cls, schema: str) -> _Statements:
        """Statements naming every table of ``schema`` explicitly (no search_path reliance)."""

        def render(text: str) -> str:
            tables = {name: sql.Identifier(schema, name) for name in (*_TABLES, "schema_version")}
            return sql.SQL(text).format(**tables).as_string(None)

        return cls(
            try_lock="SELECT pg_try_advisory_lock(%s)",
            lock="SELECT pg_advisory_lock(%s)",
            unlock="SELECT pg_advisory_unlock(%s)",
            read_state=render("SELECT state FROM {conversations} WHERE conversation_id = %s"),
            read_transcript=render(
                'SELECT seq, role, content, "timestamp" FROM {messages} '
                "WHERE conversation_id = %s ORDER BY seq"
            ),
            read_newest=render(
                'SELECT seq, role, content, "timestamp" FROM ('
                'SELECT seq, role, content, "timestamp" FROM {messages} '
                "WHERE conversation_id = %s ORDER BY seq DESC LIMIT %s) AS newest ORDER BY seq"
            ),
            upsert_state=render(
                "INSERT INTO {conversations} (conversation_id, state, updated_at) "
                "VALUES (%s, %s, %s) ON CONFLICT (conversation_id) DO UPDATE SET "
                "state = EXCLUDED.state, updated_at = EXCLUDED.updated_at"
            ),
            append_messages=render(
                'INSERT INTO {messages} (conversation_id, seq, role, content, "timestamp") '
                "SELECT %(conversation)s, base.last + m.n, m.role, m.content, m.stamp "
                "FROM unnest(%(roles)s::text[], %(contents)s::text[], %(stamps)s::text[]) "
                "WITH ORDINALITY AS m (role, content, stamp, n) "
                "CROSS JOIN (SELECT COALESCE(max(seq), 0) AS last FROM {messages} "
                "WHERE conversation_id = %(conversation)s) AS base ORDER BY m.n"
            ),
            add_outbox=render(
                "INSERT INTO {outbox} (id, topic, payload, conversation_id) "
                "SELECT o.id, o.topic, o.payload, %(conversation)s "
                "FROM unnest(%(ids)s::text[], %(topics)s::text[], %(payloads)s::text[]) "
                "WITH ORDINALITY AS o (id, topic, payload, n) ORDER BY o.n "
                "ON CONFLICT (id) DO NOTHING"
            ),
            pending=render(
                "SELECT id, topic, payload FROM {outbox} WHERE topic = %s AND NOT applied "
                "ORDER BY seq LIMIT %s"
            ),
            complete=render(
                "UPDATE {outbox} SET applied = true WHERE id = ANY(%s) AND NOT applied"
            ),
            version=render("SELECT max(version) FROM {schema_version}"),
        )


class _Attempt:
    """One acquisition of a conversation lock, which its waiter may abandon (cancellation)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: _Connection | None = None
        self.abandoned = False

    def wait_on(self, connection: _Connection | None) -> None:
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
                target=_cancel_quietly, args=(waiting,), name="affect-memory-pg-cancel"
            ).start()


def _cancel_quietly(connection: _Connection) -> None:
    with suppress(psycopg.Error):
        connection.cancel_safe(timeout=5)


@dataclass
class _Lease:
    """A pooled connection holding one conversation's session advisory lock."""

    connection: _Connection
    key: int


class PostgresStateStore:
    """A ``StateStore`` in a PostgreSQL schema; safe across tasks, processes and hosts.

    Use one instance per process; it keeps a pool of up to ``pool_size`` connections, one per
    running turn. Instances anywhere on the same database and schema cooperate.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        lock_timeout: float = 30.0,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        """Connect to ``url`` (a libpq URL or keyword string), migrating ``schema`` if needed."""
        if not isinstance(url, str) or not url.strip():
            raise InvalidInputError(f"url must be a PostgreSQL connection URL, got {shown(url)}")
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError(
                "schema must be a lower-case PostgreSQL identifier (letters, digits, _; at most "
                f"63 characters, not starting with a digit), got {shown(schema)}"
            )
        for name, seconds in (("lock_timeout", lock_timeout), ("connect_timeout", connect_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise InvalidInputError(f"{name} must be seconds, got {shown(seconds)}")
            if not (math.isfinite(seconds) and seconds > 0):
                raise InvalidInputError(f"{name} must be positive and finite, got {seconds!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError(f"pool_size must be a positive integer, got {shown(pool_size)}")
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as error:
            raise InvalidInputError(
                f"url is not a PostgreSQL connection URL ({_one_line(error)}): "
                f"{shown(_redacted(url))}"
            ) from None
        self._schema = schema
        self._lock_timeout = float(lock_timeout)
        self._clock = clock
        self._display = _display(params)
        self._backing = f"{self._display}#{schema}"
        self._sql = _Statements.for_schema(schema)
        self._closed = False
        self._gates: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._gates_guard = threading.Lock()
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(2, math.ceil(connect_timeout)),
            "fallback_application_name": "affect-memory",
        }
        try:
            first = psycopg.connect(url, **kwargs)
        except psycopg.Error as error:
            raise StateStoreError(
                f"cannot connect to PostgreSQL at {self._display}: {_one_line(error)}"
            ) from error
        try:
            self._migrate(first)
        finally:
            first.close()
        self._pool: ConnectionPool[_Connection] = ConnectionPool(
            url,
            kwargs=kwargs,
            min_size=1,
            max_size=pool_size,
            open=True,
            configure=_configure,
            name=f"affect-memory:{schema}",
            timeout=self._lock_timeout,
        )
        self._pool_size = pool_size
        # Calls on a connection a turn already holds: never waits for a lock or the pool.
        self._work = concurrent.futures.ThreadPoolExecutor(
            max_workers=pool_size, thread_name_prefix="affect-memory-pg"
        )
        # Calls that wait for a pooled connection or a conversation lock.
        self._waits = concurrent.futures.ThreadPoolExecutor(
            max_workers=pool_size + 2, thread_name_prefix="affect-memory-pg-wait"
        )

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding this store's tables."""
        return self._schema

    @property
    def url(self) -> str:
        """Where the store connects, without any password."""
        return self._display

    @property
    def lock_timeout(self) -> float:
        """Seconds a turn waits for its conversation before ``LockTimeoutError``."""
        return self._lock_timeout

    def close(self) -> None:
        """Close the pool; the store cannot be used afterwards."""
        self._closed = True
        self._waits.shutdown(wait=True)
        self._work.shutdown(wait=True)
        self._pool.close()

    async def __aenter__(self) -> PostgresStateStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- StateStore ---------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, conversation_id: str) -> AsyncIterator[_PostgresTransaction]:
        """Hold ``conversation_id`` exclusively across processes and hosts until the block ends."""
        check_conversation_id(conversation_id)
        _check_storable(conversation_id, "conversation_id")
        self._check_open()
        with holding(self._backing, conversation_id):
            gate = self._gate(conversation_id)
            lease = await self._acquire(conversation_id, gate)
            transaction = _PostgresTransaction(self, conversation_id, lease)
            try:
                yield transaction
            finally:
                transaction.closed = True
                try:
                    released = self._release_when_done(lease, transaction.in_flight)
                    await asyncio.shield(asyncio.wrap_future(released))
                finally:
                    gate.release()

    async def pending_outbox(self, topic: str, limit: int = 1000) -> tuple[OutboxItem, ...]:
        """Outbox items of ``topic`` not yet applied, oldest first."""
        if not isinstance(topic, str):
            raise InvalidInputError(f"topic must be a string, got {shown(topic)}")
        check_limit(limit, minimum=1)
        if "\x00" in topic:
            return ()  # no stored topic can hold one
        statement = self._sql.pending
        rows = await self._pooled(lambda c: c.execute(statement, (topic, limit)).fetchall(), "read")
        items: list[OutboxItem] = []
        for item_id, item_topic, payload in rows:
            try:
                items.append(OutboxItem(id=item_id, topic=item_topic, payload=json.loads(payload)))
            except (ValueError, ValidationError) as error:
                raise CorruptStateError(
                    f"outbox item {shown(item_id)} in schema {self._schema!r} cannot be read: "
                    f"{error}"
                ) from error
        return tuple(items)

    async def complete_outbox(self, ids: Sequence[str]) -> None:
        """Mark items applied; unknown ids are ignored."""
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise InvalidInputError(f"ids must be a sequence of ids, got {shown(ids)}")
        for item_id in ids:
            if not isinstance(item_id, str):
                raise InvalidInputError(f"outbox ids must be strings, got {shown(item_id)}")
        wanted = [item_id for item_id in ids if "\x00" not in item_id]
        if not wanted:
            return
        statement = self._sql.complete
        await self._pooled(lambda c: c.execute(statement, (wanted,)), "complete items of")

    # -- schema -------------------------------------------------------------------------

    def _migrate(self, connection: _Connection) -> None:
        """Apply missing migrations once, however many processes open the schema at once."""
        version = self._read_version(connection)
        if version == SCHEMA_VERSION:
            return
        self._refuse_unknown(version)
        schema = sql.Identifier(self._schema)
        try:
            with connection.transaction():
                connection.execute(
                    "SELECT set_config('lock_timeout', %s, true)",
                    (f"{max(1, int(self._lock_timeout * 1000))}ms",),
                )
                connection.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    (_MIGRATION_LOCK_CLASS, _schema_key32(self._schema)),
                )
                exists = connection.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,)
                ).fetchone()
                if exists is None:
                    connection.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
                found = connection.execute(
                    "SELECT c.relname FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relname = ANY(%s)",
                    (self._schema, [*_TABLES, "schema_version"]),
                ).fetchall()
                names = {name for (name,) in found}
                if "schema_version" not in names and names:
                    raise StateStoreError(
                        f"PostgreSQL schema {self._schema!r} at {self._display} holds tables "
                        f"({', '.join(sorted(names))}) but no affect-memory schema_version "
                        "table; use another schema"
                    )
                connection.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
                        "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                    ).format(sql.Identifier(self._schema, "schema_version"))
                )
                row = connection.execute(self._sql.version).fetchone()
                version = 0 if row is None or row[0] is None else int(row[0])
                self._refuse_unknown(version)
                for number, description, statements in _MIGRATIONS:
                    if number <= version:
                        continue
                    for statement in statements:
                        connection.execute(sql.SQL(statement).format(schema=schema))
                    connection.execute(
                        sql.SQL("INSERT INTO {} (version, description) VALUES (%s, %s)").format(
                            sql.Identifier(self._schema, "schema_version")
                        ),
                        (number, description),
                    )
        except pg_errors.LockNotAvailable:
            raise StateStoreError(
                f"another process kept migrating PostgreSQL schema {self._schema!r} at "
                f"{self._display} for longer than {self._lock_timeout:g} s (lock_timeout)"
            ) from None
        except psycopg.Error as error:
            raise StateStoreError(
                f"cannot create PostgreSQL schema {self._schema!r} at {self._display}: "
                f"{_one_line(error)}"
            ) from error

    def _read_version(self, connection: _Connection) -> int | None:
        """The schema's newest applied migration; None when it has no version table yet."""
        try:
            row = connection.execute(self._sql.version).fetchone()
        except pg_errors.UndefinedTable:
            return None
        except psycopg.Error as error:
            raise StateStoreError(
                f"cannot read the version of PostgreSQL schema {self._schema!r} at "
                f"{self._display}: {_one_line(error)}"
            ) from error
        return 0 if row is None or row[0] is None else int(row[0])

    def _refuse_unknown(self, version: int | None) -> None:
        if version is not None and not 0 <= version <= SCHEMA_VERSION:
            raise StateStoreError(
                f"PostgreSQL schema {self._schema!r} at {self._display} has schema version "
                f"{version}; this affect-memory reads version {SCHEMA_VERSION} (upgrade "
                "affect-memory, or use another schema)"
            )

    # -- locking ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StateStoreError(f"the store on {self._backing} is closed")

    def _gate(self, conversation_id: str) -> asyncio.Lock:
        """This process's queue for a conversation (per event loop): one waiter at the server."""
        key = (id(asyncio.get_running_loop()), conversation_id)
        with self._gates_guard:
            gate = self._gates.get(key)
            if gate is None:
                gate = asyncio.Lock()
                self._gates[key] = gate
            return gate

    async def _acquire(self, conversation_id: str, gate: asyncio.Lock) -> _Lease:
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
            attempt = _Attempt()
            key = conversation_lock_key(self._schema, conversation_id)
            future = self._submit(
                self._waits, lambda: self._lease(conversation_id, key, deadline, attempt)
            )
            try:
                connection = await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                attempt.abandon()
                future.add_done_callback(self._discard_if_leased)
                raise
            return _Lease(connection, key)
        except BaseException:
            gate.release()
            raise

    def _lease(
        self, conversation_id: str, key: int, deadline: float, attempt: _Attempt
    ) -> _Connection:
        """In a waiting thread: a pooled connection, then the lock (fast try, then a wait)."""
        connection, acquired = self._first_statement(
            f"conversation {shown(conversation_id)}",
            "lock",
            deadline,
            lambda c: bool(c.execute(self._sql.try_lock, (key,)).fetchone()[0]),  # type: ignore[index]
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
        self, connection: _Connection, conversation_id: str, key: int, deadline: float
    ) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LockTimeoutError(conversation_id, self._lock_timeout, _HELD_ELSEWHERE)
        try:
            # A session lock taken inside a transaction outlives it; SET LOCAL ends with it.
            with connection.transaction():
                connection.execute(
                    "SELECT set_config('lock_timeout', %s, true)",
                    (f"{max(1, int(remaining * 1000))}ms",),
                )
                connection.execute(self._sql.lock, (key,))
        except pg_errors.LockNotAvailable:
            raise LockTimeoutError(conversation_id, self._lock_timeout, _HELD_ELSEWHERE) from None
        except pg_errors.QueryCanceled:
            raise asyncio.CancelledError from None
        except psycopg.Error as error:
            raise self._failure(
                connection, f"conversation {shown(conversation_id)}", "wait for", error
            ) from error

    def _first_statement(
        self, subject: str, what: str, deadline: float, work: Callable[[_Connection], _T]
    ) -> tuple[_Connection, _T]:
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
                raise self._failure(connection, subject, what, error) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _discard_if_leased(self, future: concurrent.futures.Future[_Connection]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._discard(future.result())

    def _discard(self, connection: _Connection) -> None:
        """Close a connection (freeing any lock its session holds) and hand it back dead."""
        with suppress(Exception):
            connection.close()
        with suppress(Exception):
            self._pool.putconn(connection)

    def _release(self, lease: _Lease) -> None:
        """Unlock and return the connection; anything unexpected closes it instead."""
        connection = lease.connection
        try:
            if not connection.closed and not connection.broken:
                row = connection.execute(self._sql.unlock, (lease.key,)).fetchone()
                idle = connection.info.transaction_status == TransactionStatus.IDLE
                if row is not None and row[0] is True and idle:
                    self._pool.putconn(connection)
                    return
        except Exception:  # closing below releases the lock, whatever failed
            pass
        self._discard(connection)

    def _release_when_done(
        self, lease: _Lease, work: Sequence[concurrent.futures.Future[Any]]
    ) -> concurrent.futures.Future[None]:
        """Release once every call of the holder has finished (a cancelled commit may run on)."""
        released: concurrent.futures.Future[None] = concurrent.futures.Future()
        pending = [future for future in work if not future.done()]
        remaining = [len(pending)]
        guard = threading.Lock()

        def release() -> None:
            try:
                self._work.submit(self._release, lease).add_done_callback(
                    lambda _: released.set_result(None)
                )
            except RuntimeError:  # the store was closed meanwhile
                self._discard(lease.connection)
                released.set_result(None)

        def finished(_: concurrent.futures.Future[Any]) -> None:
            with guard:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                release()

        if not pending:
            release()
        for future in pending:
            future.add_done_callback(finished)
        return released

    # -- running statements -------------------------------------------------------------

    def _submit(
        self, executor: concurrent.futures.ThreadPoolExecutor, work: Callable[[], _T]
    ) -> concurrent.futures.Future[_T]:
        self._check_open()
        try:
            return executor.submit(work)
        except RuntimeError as error:  # shut down concurrently
            raise StateStoreError(f"the store on {self._backing} is closed") from error

    async def _pooled(self, work: Callable[[_Connection], _T], what: str) -> _T:
        """Run ``work`` on any pooled connection (outbox calls, which need no lock)."""
        deadline = time.monotonic() + self._lock_timeout

        def call() -> _T:
            connection, result = self._first_statement("the outbox", what, deadline, work)
            self._pool.putconn(connection)
            return result

        return await asyncio.wrap_future(self._submit(self._waits, call))

    def _failure(
        self, connection: _Connection, subject: str, what: str, error: BaseException
    ) -> StateStoreError:
        """A driver error as a store error naming what was being done to which subject."""
        if connection.broken or connection.closed:
            return _ConnectionLostError(
                f"lost the PostgreSQL connection while trying to {what} {subject} "
                f"({_one_line(error)}); a conversation it held is released, start the turn again"
            )
        return StateStoreError(
            f"PostgreSQL could not {what} {subject} in schema {self._schema!r}: {_one_line(error)}"
        )

    def _read_state(self, connection: _Connection, conversation_id: str) -> AffectState | None:
        row = connection.execute(self._sql.read_state, (conversation_id,)).fetchone()
        return None if row is None else _decode_state(conversation_id, row[0])

    def _read_transcript(
        self, connection: _Connection, conversation_id: str, limit: int | None
    ) -> tuple[Message, ...]:
        if limit is None:
            rows = connection.execute(self._sql.read_transcript, (conversation_id,)).fetchall()
        else:
            rows = connection.execute(self._sql.read_newest, (conversation_id, limit)).fetchall()
        return _decode_messages(conversation_id, rows)

    def _commit_work(
        self, conversation_id: str, state: object, messages: object, outbox: object
    ) -> Callable[[_Connection], None]:
        """Check and serialize a commit here; the returned work only writes."""
        now = self._clock()
        prepared = prepare_commit(state, messages, outbox, now)
        for index, message in enumerate(prepared.messages):
            _check_storable(message.content, f"messages[{index}].content")
        for index, item in enumerate(prepared.outbox):
            _check_storable(item.id, f"outbox[{index}].id")
            _check_storable(item.topic, f"outbox[{index}].topic")
        state_json = (
            None
            if prepared.state is None
            else f'{{"version":{STATE_FORMAT_VERSION},"state":{prepared.state.model_dump_json()}}}'
        )
        try:
            payloads = [
                json.dumps(item.payload, ensure_ascii=False, allow_nan=False)
                for item in prepared.outbox
            ]
        except (TypeError, ValueError) as error:
            raise InvalidInputError(f"outbox payload is not JSON-serializable: {error}") from None
        message_rows = {
            "conversation": conversation_id,
            "roles": [message.role for message in prepared.messages],
            "contents": [message.content for message in prepared.messages],
            "stamps": [message.timestamp for message in prepared.messages],
        }
        outbox_rows = {
            "conversation": conversation_id,
            "ids": [item.id for item in prepared.outbox],
            "topics": [item.topic for item in prepared.outbox],
            "payloads": payloads,
        }
        stamp = now.astimezone(UTC)
        statements = self._sql

        def write(connection: _Connection) -> None:
            # One round trip: BEGIN, the writes and COMMIT travel as one pipeline; any
            # failure rolls the whole transaction back.
            with connection.pipeline(), connection.transaction():
                if state_json is not None:
                    connection.execute(
                        statements.upsert_state, (conversation_id, state_json, stamp)
                    )
                if message_rows["roles"]:
                    connection.execute(statements.append_messages, message_rows)
                if outbox_rows["ids"]:
                    connection.execute(statements.add_outbox, outbox_rows)

        return write


_HELD_ELSEWHERE = (
    "another turn holds it (a worker still in that turn, or one on a host whose connection "
    "has not dropped yet)"
)


def _configure(connection: _Connection) -> None:
    """Session settings of every pooled connection (see ``_SESSION_SETTINGS``)."""
    names = list(_SESSION_SETTINGS)
    calls = ", ".join("set_config(%s, %s, false)" for _ in names)
    values = [part for name in names for part in (name, _SESSION_SETTINGS[name])]
    connection.execute(f"SELECT {calls}", values)


def _schema_key32(schema: str) -> int:
    """A signed 32-bit key of the schema for the two-int migration lock."""
    return int.from_bytes(hashlib.sha256(schema.encode()).digest()[:4], "big", signed=True)


def _display(params: dict[str, Any]) -> str:
    """``postgresql://user@host:port/db`` of a parsed connection string, never the password."""
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "localhost")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname') or ''}"


def _decode_messages(conversation_id: str, rows: Sequence[tuple[Any, ...]]) -> tuple[Message, ...]:
    """Validate message rows; any problem names the message and the conversation."""
    messages: list[Message] = []
    for seq, role, content, timestamp in rows:
        try:
            messages.append(
                Message.model_validate({"role": role, "content": content, "timestamp": timestamp})
            )
        except ValidationError as error:
            raise CorruptStateError(
                f"message {seq} of conversation {shown(conversation_id)} cannot be read: {error}"
            ) from error
    return tuple(messages)


def _decode_state(conversation_id: str, text: str) -> AffectState:
    """Validate a stored state envelope; any problem names the conversation."""
    try:
        envelope: Any = json.loads(text)
    except ValueError as error:
        raise CorruptStateError(
            f"stored state of conversation {shown(conversation_id)} is not valid JSON: {error}"
        ) from error
    if not isinstance(envelope, dict) or set(envelope) != {"version", "state"}:
        raise CorruptStateError(
            f"stored state of conversation {shown(conversation_id)} is not a "
            '{"version": ..., "state": ...} envelope'
        )
    if envelope["version"] != STATE_FORMAT_VERSION:
        raise CorruptStateError(
            f"stored state of conversation {shown(conversation_id)} has format version "
            f"{envelope['version']!r}; this affect-memory reads version {STATE_FORMAT_VERSION}"
        )
    try:
        return AffectState.model_validate(envelope["state"])
    except ValidationError as error:
        raise CorruptStateError(
            f"stored state of conversation {shown(conversation_id)} failed validation: {error}"
        ) from error


class _PostgresTransaction:
    """One held conversation of a ``PostgresStateStore``."""

    def __init__(self, store: PostgresStateStore, conversation_id: str, lease: _Lease) -> None:
        self._store = store
        self._conversation_id = conversation_id
        self._lease = lease
        self.committed = False
        self.closed = False
        self.lost: str | None = None
        """Why the connection holding the lock is gone; the transaction is then unusable."""
        self.in_flight: list[concurrent.futures.Future[Any]] = []
        """Calls on the lease's connection; the lock is kept until they finish."""

    def _check_open(self) -> None:
        if self.closed:
            raise StateStoreError(
                f"transaction on conversation {shown(self._conversation_id)} is already closed"
            )
        if self.lost is not None:
            raise StateStoreError(self.lost)

    async def _run(self, work: Callable[[_Connection], _T], what: str) -> _T:
        store, connection = self._store, self._lease.connection

        def call() -> _T:
            try:
                return work(connection)
            except psycopg.Error as error:
                raise store._failure(
                    connection, f"conversation {shown(self._conversation_id)}", what, error
                ) from error

        future = store._submit(store._work, call)
        self.in_flight.append(future)
        try:
            return await asyncio.wrap_future(future)
        except _ConnectionLostError as error:
            self.lost = str(error)
            raise

    async def load_state(self) -> AffectState | None:
        """The committed state, or None for a new conversation."""
        self._check_open()
        return await self._run(
            lambda c: self._store._read_state(c, self._conversation_id), "load the state of"
        )

    async def load_transcript(self, limit: int | None = None) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        self._check_open()
        if limit is not None:
            check_limit(limit, minimum=1)
        return await self._run(
            lambda c: self._store._read_transcript(c, self._conversation_id, limit),
            "load the transcript of",
        )

    async def commit(
        self,
        *,
        state: AffectState | None,
        messages: Sequence[Message],
        outbox: Sequence[OutboxItem] = (),
    ) -> None:
        """Write state (None keeps the old), messages and outbox in one PostgreSQL transaction.

        If the caller is cancelled mid-commit, the write still finishes (or rolls back)
        before the conversation's lock is released. If the connection drops during the
        commit, the error says so: the turn was then written whole or not at all.
        """
        self._check_open()
        if self.committed:
            raise StateStoreError(
                f"transaction on conversation {shown(self._conversation_id)} was already committed"
            )
        work = self._store._commit_work(self._conversation_id, state, messages, outbox)
        self.committed = True
        try:
            await self._run(work, "commit")
        except _ConnectionLostError as error:
            raise _ConnectionLostError(
                f"{error}; the commit was written whole or not at all, and the next "
                "transaction reads which"
            ) from error
        except BaseException:
            future = self.in_flight[-1]
            if future.done() and not future.cancelled() and future.exception() is not None:
                self.committed = False  # rolled back: nothing was written, a retry is allowed
            raise
