"""Talking to PostgreSQL: the first connection of a store or index, the one connection pool
both use (``open_pool``, ``DEFAULT_POOL_SIZE`` sessions unless told), one-line driver errors
without passwords, the settings of every pooled session, how long a lock is waited for, what a
schema may be called, and the text PostgreSQL cannot store (NUL, lone surrogates)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from affect_memory.db import DEFAULT_POOL_SIZE
from affect_memory.db.location import redacted
from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = [
    "DEFAULT_POOL_SIZE",
    "SCHEMA_NAME",
    "SESSION_SETTINGS",
    "Connection",
    "cancel_quietly",
    "check_storable",
    "configure",
    "connect_first",
    "display",
    "one_line",
    "open_pool",
    "set_lock_timeout",
]

Connection = psycopg.Connection[tuple[Any, ...]]
"""A psycopg connection whose rows are tuples."""

SESSION_SETTINGS = {
    # Safety nets, never reached by this store's own short transactions: a session stuck
    # inside a transaction is ended (releasing its conversation), and a peer host that
    # vanished is noticed within about 25 s instead of the kernel's two hours.
    "idle_in_transaction_session_timeout": "60s",
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}
"""Settings of every pooled session (``configure``)."""

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""What a schema name may be: a lower-case PostgreSQL identifier."""


def connect_first(
    url: str,
    *,
    connect_timeout: float,
    application_name: str,
    refused: Callable[[str], Exception],
) -> tuple[Connection, dict[str, Any]]:
    """Open the first connection to ``url`` and return it with the keyword arguments it used.

    The arguments (autocommit, ``connect_timeout`` rounded up to at least 2 s, ``application_name``
    unless the URL sets one) are the ones the caller's pool then opens its sessions with. A driver
    error becomes ``refused(reason)``, the reason one line with passwords masked; the driver
    error itself is not chained, since its text may hold the URL's password.
    """
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": max(2, math.ceil(connect_timeout)),
        "fallback_application_name": application_name,
    }
    try:
        connection = psycopg.connect(url, **kwargs)
    except psycopg.Error as error:
        raise refused(one_line(error)) from None
    return connection, kwargs


def one_line(error: BaseException) -> str:
    """A driver error as one line, passwords masked: libpq puts hints on indented lines."""
    text = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    return redacted(text) or type(error).__name__  # libpq may quote the URL it was given


def check_storable(value: str, name: str) -> None:
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


def cancel_quietly(connection: Connection) -> None:
    """Ask the server to cancel what ``connection`` runs; a failure to ask is ignored."""
    with suppress(psycopg.Error):
        connection.cancel_safe(timeout=5)


def set_lock_timeout(connection: Connection, seconds: float, *, local: bool = True) -> None:
    """Bound how long ``connection`` waits for a lock to ``seconds`` (at least 1 ms): for the
    transaction it is in (``local``), else for the session until set again."""
    connection.execute(
        "SELECT set_config('lock_timeout', %s, %s)",
        (f"{max(1, int(seconds * 1000))}ms", local),
    )


def configure(connection: Connection, search_path: str | None = None) -> None:
    """Session settings of every pooled connection (see ``SESSION_SETTINGS``), and the schema
    its statements name tables in, if ``search_path`` is given."""
    chosen = dict(SESSION_SETTINGS)
    if search_path is not None:
        chosen["search_path"] = search_path
    calls = ", ".join("set_config(%s, %s, false)" for _ in chosen)
    values = [part for name, value in chosen.items() for part in (name, value)]
    connection.execute(f"SELECT {calls}", values)


def open_pool(
    url: str,
    kwargs: dict[str, Any],
    *,
    name: str,
    timeout: float,
    pool_size: int = DEFAULT_POOL_SIZE,
    search_path: str | None = None,
) -> ConnectionPool[Connection]:
    """An open pool of one to ``pool_size`` sessions to ``url``, each opened with ``kwargs``
    (``connect_first``'s) and set up by ``configure``; a caller waits at most ``timeout``
    seconds for a free one (then ``psycopg_pool.PoolTimeout``)."""

    def prepare(connection: Connection) -> None:
        configure(connection, search_path)

    return ConnectionPool(
        url,
        kwargs=kwargs,
        min_size=1,
        max_size=pool_size,
        open=True,
        configure=prepare,
        name=name,
        timeout=timeout,
    )


def display(params: dict[str, Any]) -> str:
    """``postgresql://user@host:port/db`` of a parsed connection string, never the password."""
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "localhost")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname') or ''}"


