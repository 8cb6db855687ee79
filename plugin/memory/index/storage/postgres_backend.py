"""The index in PostgreSQL: shared by every process and host of a fleet.

Every table lives in one schema (``affect_memory`` by default, beside the state store's
tables, which have other names), set as the ``search_path`` of the index's own pooled
connections (the pool the state store uses too, ``affect_memory.db.postgres_connections``),
so the statements are the SQLite backend's. Opening migrates the schema under a
transaction-scoped advisory lock, so many processes may open it at once.

A user lock is a session-level advisory lock, two 32-bit keys (``'AFMI'`` and a hash of the
schema and the user's collection), taken on a pooled connection that the locking thread keeps
for the block and runs its transactions on. A killed writer's connection drops, and the
server releases its lock with it. Reads run in one ``REPEATABLE READ READ ONLY``
transaction; writes in ``READ COMMITTED``, retried on a deadlock or serialization failure.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from affect_memory.db import DEFAULT_POOL_SIZE
from affect_memory.errors import StoreError, StoreUnavailableError
from affect_memory.kernel.errors import AffectMemoryError
from affect_memory.memory.index.storage.backend import BackendKind
from affect_memory.memory.index.storage.schema import migrate

__all__ = ["DEFAULT_SCHEMA", "PostgresBackend"]

_T = TypeVar("_T")

DEFAULT_SCHEMA = "affect_memory"
"""The PostgreSQL schema the index's tables live in unless the URL names another."""

_LOCK_CLASS = 0x41464D49
"""First key of the index's user locks ('AFMI')."""
_MIGRATION_CLASS = 0x41464D58
"""First key of the lock serialising the index's migrations ('AFMX')."""
_RETRIES = 8


def _key32(*parts: str) -> int:
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


@functools.lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    """A statement with ``?`` placeholders in psycopg's ``%s`` style."""
    return sql.replace("?", "%s")


class _PostgresTx:
    """A ``Tx`` over one psycopg connection inside a transaction."""

    def __init__(self, connection: Any, schema: str) -> None:
        self._connection = connection
        self._schema = schema

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._connection.execute(_pg(sql), params).fetchall()
        return rows

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._connection.execute(_pg(sql), params).fetchone()
        return row

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._connection.execute(_pg(sql), params).rowcount)

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        if params:
            with self._connection.cursor() as cursor:
                cursor.executemany(_pg(sql), params)

    def existing_tables(self, names: Sequence[str]) -> set[str]:
        found = self._connection.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s)",
            (self._schema, list(names)),
        ).fetchall()
        return {name for (name,) in found}


class PostgresBackend:
    """A memory index in a PostgreSQL schema."""

    kind: BackendKind = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = DEFAULT_POOL_SIZE,
        connect_timeout: float = 10.0,
        lock_timeout: float = 30.0,
    ) -> None:
        """Connect to ``url`` and migrate ``schema`` if needed."""
        try:
            import psycopg
            import psycopg_pool  # noqa: F401 - the pool's; refused here with the hint if missing
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            from affect_memory.errors import MissingExtraError

            raise MissingExtraError(
                "a PostgreSQL memory index needs psycopg 3 and psycopg-pool: "
                "pip install 'affect-memory[postgres]'"
            ) from None
        from affect_memory.db.location import redacted
        from affect_memory.db.postgres_connections import (
            SCHEMA_NAME,
            connect_first,
            display,
            one_line,
            open_pool,
        )

        if not SCHEMA_NAME.fullmatch(schema):
            raise StoreError(
                "the index schema must be a lower-case PostgreSQL identifier (letters, digits, "
                f"_; at most 63 characters, not starting with a digit), got {schema!r}"
            )
        from affect_memory.redaction import normalize_userinfo, redact, url_secrets

        url = normalize_userinfo(url)  # a password with an unencoded / or @ reaches libpq whole
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as error:
            reason = redact(one_line(error), url_secrets(url))
            raise StoreError(
                f"--index is not a PostgreSQL URL ({reason}): {redacted(url)!r}"
            ) from None
        self._psycopg = psycopg
        self._one_line = one_line
        self._schema = schema
        self._display = f"{display(params)}?schema={schema}"
        self._closed = False
        self._local = threading.local()
        first, kwargs = connect_first(
            url,
            connect_timeout=connect_timeout,
            application_name="affect-memory-index",
            refused=lambda reason: StoreUnavailableError(
                f"cannot connect to the memory index at {self._display}: {reason}"
            ),
        )
        try:
            self._migrate(first, lock_timeout)
        finally:
            first.close()

        self._pool = open_pool(
            url,
            kwargs,
            name=f"affect-memory-index:{schema}",
            timeout=max(connect_timeout, lock_timeout),
            pool_size=pool_size,
            search_path=schema,
        )

    def describe(self) -> str:
        """``postgresql://user@host:port/db?schema=...``, never the password."""
        return self._display

    def _migrate(self, connection: Any, lock_timeout: float) -> None:
        from affect_memory.db.postgres_connections import set_lock_timeout

        psycopg = self._psycopg
        try:
            with connection.transaction():
                set_lock_timeout(connection, lock_timeout)
                connection.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    (_MIGRATION_CLASS, _key32(self._schema)),
                )
                connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
                connection.execute("SELECT set_config('search_path', %s, true)", (self._schema,))
                migrate(_PostgresTx(connection, self._schema), where=self._display)
        except AffectMemoryError:
            raise
        except psycopg.errors.LockNotAvailable:
            raise StoreError(
                f"another process kept migrating the memory index at {self._display} for "
                f"longer than {lock_timeout:g} s"
            ) from None
        except psycopg.Error as error:
            raise StoreError(
                f"cannot create the memory index at {self._display}: {self._one_line(error)}"
            ) from None

    # ---------------------------------------------------------------- transactions

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._closed:
            raise StoreError(f"the memory index {self._display} is closed")
        pinned = getattr(self._local, "pinned", None)
        if pinned is not None:
            yield pinned
            return
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as connection:
                yield connection
        except PoolTimeout as error:
            raise StoreUnavailableError(
                f"no connection to the memory index at {self._display} came free: {error}"
            ) from None

    def _fail(self, error: Exception) -> AffectMemoryError:
        psycopg = self._psycopg
        kind = StoreUnavailableError if isinstance(error, psycopg.OperationalError) else StoreError
        return kind(f"memory index {self._display}: {self._one_line(error)}")

    def read(self, work: Callable[[_PostgresTx], _T]) -> _T:
        """``work`` in one ``REPEATABLE READ READ ONLY`` transaction."""
        psycopg = self._psycopg
        try:
            with self._connection() as connection, connection.transaction():
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return work(_PostgresTx(connection, self._schema))
        except AffectMemoryError:
            raise
        except psycopg.Error as error:
            raise self._fail(error) from error

    def write(self, work: Callable[[_PostgresTx], _T]) -> _T:
        """``work`` in one transaction, retried on a deadlock or serialization failure."""
        psycopg = self._psycopg
        retried = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
        for attempt in range(_RETRIES):
            try:
                with self._connection() as connection, connection.transaction():
                    return work(_PostgresTx(connection, self._schema))
            except AffectMemoryError:
                raise
            except retried as error:
                if attempt == _RETRIES - 1:
                    raise self._fail(error) from error
                time.sleep(0.005 * (attempt + 1))
            except psycopg.Error as error:
                raise self._fail(error) from error
        raise AssertionError("unreachable")  # pragma: no cover

    # ---------------------------------------------------------------- user locks

    def _lock_keys(self, name: str) -> tuple[int, int]:
        return _LOCK_CLASS, _key32(self._schema, name)

    @contextmanager
    def _pinned(self) -> Iterator[Any]:
        """A pooled connection this thread keeps (and runs its transactions on) for the block."""
        if getattr(self._local, "pinned", None) is not None:
            raise StoreError("a memory index user lock is already held by this thread")
        with self._connection() as connection:
            self._local.pinned = connection
            try:
                yield connection
            finally:
                self._local.pinned = None

    @contextmanager
    def lock(self, name: str, *, timeout: float) -> Iterator[None]:
        """Hold user lock ``name`` (a session advisory lock), waiting at most ``timeout``."""
        from affect_memory.db.postgres_connections import set_lock_timeout

        psycopg = self._psycopg
        keys = self._lock_keys(name)
        with self._pinned() as connection:
            try:
                set_lock_timeout(connection, timeout, local=False)
                connection.execute("SELECT pg_advisory_lock(%s, %s)", keys)
                connection.execute("SELECT set_config('lock_timeout', '0', false)")
            except psycopg.errors.LockNotAvailable:
                connection.execute("SELECT set_config('lock_timeout', '0', false)")
                raise StoreError(
                    f"the memories of {name} stayed locked by another writer for {timeout:g} s "
                    "(a write in another process or host still running, or a very slow Chroma "
                    "server)"
                ) from None
            except psycopg.Error as error:
                raise self._fail(error) from error
            try:
                yield
            finally:
                try:
                    connection.execute("SELECT pg_advisory_unlock(%s, %s)", keys)
                except psycopg.Error:
                    connection.close()  # a dropped session has released the lock anyway

    @contextmanager
    def try_lock(self, name: str) -> Iterator[bool]:
        """Hold user lock ``name`` for the block if nobody does; the block gets whether."""
        psycopg = self._psycopg
        keys = self._lock_keys(name)
        with self._pinned() as connection:
            try:
                row = connection.execute("SELECT pg_try_advisory_lock(%s, %s)", keys).fetchone()
            except psycopg.Error as error:
                raise self._fail(error) from error
            got = bool(row and row[0])
            try:
                yield got
            finally:
                if got:
                    try:
                        connection.execute("SELECT pg_advisory_unlock(%s, %s)", keys)
                    except psycopg.Error:
                        connection.close()

    def close(self) -> None:
        """Close the pool; safe to call twice."""
        if not self._closed:
            self._closed = True
            self._pool.close()
