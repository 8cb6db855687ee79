"""Talking to PostgreSQL: the first connection of a store or index, one-line driver errors
without passwords, the settings of every pooled session, and the text PostgreSQL cannot store
(NUL, lone surrogates)."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.state.location import redacted

__all__ = [
    "SESSION_SETTINGS",
    "Connection",
    "cancel_quietly",
    "check_storable",
    "configure",
    "connect_first",
    "display",
    "one_line",
    "redacted",
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


def configure(connection: Connection) -> None:
    """Session settings of every pooled connection (see ``SESSION_SETTINGS``)."""
    names = list(SESSION_SETTINGS)
    calls = ", ".join("set_config(%s, %s, false)" for _ in names)
    values = [part for name in names for part in (name, SESSION_SETTINGS[name])]
    connection.execute(f"SELECT {calls}", values)


def display(params: dict[str, Any]) -> str:
    """``postgresql://user@host:port/db`` of a parsed connection string, never the password."""
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "localhost")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname') or ''}"


