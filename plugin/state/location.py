"""Which state store a URL names, and opening it.

``sqlite:///RELATIVE/PATH`` and ``sqlite:////ABSOLUTE/PATH`` (SQLAlchemy's form, as the memory
index reads it) or a bare path open the embedded ``SQLiteStateStore``;
``postgresql://USER@HOST:PORT/DB`` (or ``postgres://``) opens a ``PostgresStateStore``. The
query string may set the store's own options — ``lock_timeout``, ``busy_timeout`` and
``synchronous`` for SQLite; ``schema``, ``lock_timeout``, ``pool_size`` and ``connect_timeout``
for PostgreSQL — and any other parameter of a PostgreSQL URL goes to libpq (``sslmode``,
``application_name``, ...). Without a URL the store is ``$AFFECT_MEMORY_STATE``, else the
embedded file ``DATA_DIR/state.db``. The URL is parsed by ``affect_memory.db.location``, the
memory index's parser too; this module declares the store's options and opens the store.

A URL that names no store, an unknown scheme or option, a server that does not answer and a
schema of another version are each refused with one line naming where the URL came from; a
password in the URL is never echoed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affect_memory.data_dir import default_data_dir
from affect_memory.db.location import DatabaseLocation, parse_database_url
from affect_memory.kernel.errors import InvalidInputError, StateStoreError

if TYPE_CHECKING:
    from affect_memory.state.postgres import PostgresStateStore
    from affect_memory.state.sqlite import SQLiteStateStore

__all__ = [
    "POSTGRES_OPTIONS",
    "SQLITE_OPTIONS",
    "STATE_ENV",
    "StateLocation",
    "default_state_url",
    "open_state_store",
    "parse_state_url",
    "state_store_label",
]

STATE_ENV = "AFFECT_MEMORY_STATE"
"""Environment variable naming the state store when no URL is given."""

SQLITE_OPTIONS: Mapping[str, type] = {
    "lock_timeout": float,
    "busy_timeout": float,
    "synchronous": str,
}
"""Query parameters a SQLite URL may set, and their types."""

POSTGRES_OPTIONS: Mapping[str, type] = {
    "schema": str,
    "lock_timeout": float,
    "pool_size": int,
    "connect_timeout": float,
}
"""Query parameters of a PostgreSQL URL that are the store's options rather than libpq's."""

StateLocation = DatabaseLocation
"""A parsed state URL: which store, where, and the options its query string set."""


def default_state_url(data_dir: str | os.PathLike[str] | None = None) -> str:
    """``$AFFECT_MEMORY_STATE``, else ``DATA_DIR/state.db`` (``data_dir`` or the default)."""
    configured = os.environ.get(STATE_ENV)
    if configured:
        return configured
    return str(Path(data_dir if data_dir is not None else default_data_dir()) / "state.db")


def parse_state_url(url: str | os.PathLike[str], *, source: str = "url") -> StateLocation:
    """The store ``url`` names; ``source`` (``--state``, ``$AFFECT_MEMORY_STATE``) leads errors."""
    return parse_database_url(
        url, source=source, sqlite_options=SQLITE_OPTIONS, postgres_options=POSTGRES_OPTIONS
    )


def open_state_store(
    url: str | os.PathLike[str] | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    source: str | None = None,
    **options: Any,
) -> SQLiteStateStore | PostgresStateStore:
    """Open the state store ``url`` names (default ``$AFFECT_MEMORY_STATE``, else
    ``DATA_DIR/state.db``); ``options`` go to the store (``lock_timeout=``, ``schema=``, ...).

    An option set both in the URL and here is refused. The default file's directory is made
    if missing; a file or server named explicitly must be reachable as given.
    """
    if url is None:
        from_environment = bool(os.environ.get(STATE_ENV))
        url = default_state_url(data_dir)
        source = source or (f"${STATE_ENV}" if from_environment else "the default state file")
        if not from_environment:
            Path(url).parent.mkdir(parents=True, exist_ok=True)
    location = parse_state_url(url, source=source or "url")
    allowed = SQLITE_OPTIONS if location.kind == "sqlite" else POSTGRES_OPTIONS
    for name in sorted(options):
        if name not in allowed and name != "clock":
            raise InvalidInputError(
                f"{name} is not an option of the {location.kind} state store; known: "
                f"{', '.join([*allowed, 'clock'])}"
            )
        if name in location.options:
            raise InvalidInputError(
                f"{name} is given both in {source or 'the url'} and as an option"
            )
    chosen = {**location.options, **options}
    if location.kind == "sqlite":
        from affect_memory.state.sqlite import SQLiteStateStore

        return SQLiteStateStore(location.target, **chosen)
    from affect_memory.state.postgres import PostgresStateStore

    try:
        return PostgresStateStore(location.target, **chosen)
    except StateStoreError as error:
        if type(error) is not StateStoreError or source is None:
            raise
        raise StateStoreError(f"{source}: {error}") from error  # say where the URL came from


def state_store_label(store: object) -> str:
    """Where an opened store keeps its data: the file, or the server URL and schema."""
    path = getattr(store, "path", None)
    if path is not None:
        return str(path)
    url, schema = getattr(store, "url", None), getattr(store, "schema", None)
    if url is not None:
        return f"{url} (schema {schema})" if schema else str(url)
    return type(store).__name__
