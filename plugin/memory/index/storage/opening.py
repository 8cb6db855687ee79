"""Where a store's memory index lives: chosen by ``ChromaMemory(location, index=...)``.

``index`` is one of

* ``None`` (the default), by the Chroma location: an embedded path keeps the index in a SQLite
  file inside the Chroma directory (``INDEX_FILE``), moving with it; ``":memory:"`` keeps it
  in the process's shared in-memory database; a server URL keeps it in a SQLite file in the
  data directory (``$AFFECT_MEMORY_HOME`` or ``./.affect-memory``), named after the server,
  which serves the processes of **one host**: a fleet on several hosts needs PostgreSQL;
* ``"postgresql://..."`` (or ``postgres://``), a PostgreSQL database, the tables in the schema
  named by an optional ``?schema=NAME`` (default ``affect_memory``);
* ``"sqlite:///relative.db"``, ``"sqlite:////absolute.db"``, a path, or ``":memory:"``.

A URL is parsed by ``affect_memory.db.location``, the state store's parser, with the index's
one option (``schema``); a refusal is a ``StoreError`` of one line, never showing a password.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from affect_memory.data_dir import DATA_DIR_ENV, default_data_dir
from affect_memory.db.location import parse_database_url, redacted, url_scheme
from affect_memory.errors import StoreError
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.chroma.location import IN_MEMORY, StoreLocation
from affect_memory.memory.index.storage.backend import Backend

__all__ = [
    "DATA_DIR_ENV",
    "INDEX_ENV",
    "INDEX_FILE",
    "POSTGRES_OPTIONS",
    "IndexTarget",
    "open_backend",
    "resolve_index",
]

INDEX_FILE = "affect-memory-index.sqlite3"
"""The index file inside an embedded Chroma directory."""

INDEX_ENV = "AFFECT_MEMORY_INDEX"
"""Environment variable the CLI reads the index from when ``--index`` is not given."""

POSTGRES_OPTIONS: Mapping[str, type] = {"schema": str}
"""Query parameters of a PostgreSQL index URL that are the index's rather than libpq's."""


@dataclass(frozen=True, slots=True)
class IndexTarget:
    """A parsed index setting."""

    kind: Literal["file", "memory", "postgresql"]
    path: Path | None = None
    url: str | None = field(default=None, repr=False)  # may hold a password
    schema: str | None = None

    def describe(self) -> str:
        """The setting as a user would write it (no password)."""
        if self.kind == "memory":
            return IN_MEMORY
        if self.kind == "file":
            return str(self.path)
        return f"{redacted(self.url or '')} (schema {self.schema})"


def _default(location: StoreLocation) -> IndexTarget:
    if location.kind == "memory":
        return IndexTarget("memory")
    if location.kind == "path":
        assert location.path is not None
        return IndexTarget("file", path=location.path / INDEX_FILE)
    server = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{location.host}-{location.port}")
    return IndexTarget("file", path=default_data_dir() / f"memory-index-{server}.sqlite3")


def _url(spec: str) -> IndexTarget:
    """The index a ``sqlite:`` or ``postgresql:`` URL names, by the shared parser."""
    try:
        location = parse_database_url(
            spec, source="index", sqlite_options={}, postgres_options=POSTGRES_OPTIONS
        )
    except InvalidInputError as error:
        raise StoreError(str(error)) from None
    if location.kind == "sqlite":
        return IndexTarget("file", path=Path(location.target))
    from affect_memory.memory.index.storage.postgres_backend import DEFAULT_SCHEMA

    schema = location.options.get("schema", DEFAULT_SCHEMA)
    return IndexTarget("postgresql", url=location.target, schema=schema)


def resolve_index(spec: str | os.PathLike[str] | None, location: StoreLocation) -> IndexTarget:
    """Parse an ``index=`` setting for a store at ``location``; refuse what names no index."""
    if spec is None:
        return _default(location)
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise StoreError(
            f"index must be a PostgreSQL URL, a SQLite path or ':memory:', got {spec!r}"
        )
    if spec == IN_MEMORY:
        return IndexTarget("memory")
    scheme = url_scheme(spec)
    if scheme == "sqlite" and (
        not spec.lower().startswith("sqlite:///") or len(spec) <= len("sqlite:///")
    ):
        raise StoreError(
            f"a SQLite index URL is sqlite:///relative/path or sqlite:////absolute/path, "
            f"got {redacted(spec)!r}"
        )
    if scheme in ("sqlite", "postgresql", "postgres"):
        return _url(spec)
    if "://" in spec:
        raise StoreError(
            "index must be postgresql://..., sqlite:///PATH, a path or ':memory:', got "
            f"{redacted(spec)!r}"
        )
    path = Path(spec).expanduser()
    if path.is_dir():
        raise StoreError(f"index {spec!r} is a directory; name a SQLite file")
    return IndexTarget("file", path=path)


def open_backend(target: IndexTarget, *, lock_timeout: float) -> Backend:
    """Open (creating and migrating) the database ``target`` names."""
    if target.kind == "postgresql":
        from affect_memory.memory.index.storage.postgres_backend import PostgresBackend

        assert target.url is not None and target.schema is not None
        return PostgresBackend(target.url, schema=target.schema, lock_timeout=lock_timeout)
    from affect_memory.memory.index.storage.sqlite_backend import SQLiteBackend

    return SQLiteBackend(target.path if target.kind == "file" else None)
