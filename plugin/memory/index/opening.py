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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from affect_memory.data_dir import DATA_DIR_ENV, default_data_dir
from affect_memory.errors import StoreError
from affect_memory.memory.index.backend import Backend
from affect_memory.memory.location import IN_MEMORY, StoreLocation

__all__ = [
    "DATA_DIR_ENV",
    "INDEX_ENV",
    "INDEX_FILE",
    "IndexTarget",
    "open_backend",
    "resolve_index",
]

INDEX_FILE = "affect-memory-index.sqlite3"
"""The index file inside an embedded Chroma directory."""

INDEX_ENV = "AFFECT_MEMORY_INDEX"
"""Environment variable the CLI reads the index from when ``--index`` is not given."""

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
        from affect_memory.state.location import redacted

        return f"{redacted(self.url or '')} (schema {self.schema})"


def _default(location: StoreLocation) -> IndexTarget:
    if location.kind == "memory":
        return IndexTarget("memory")
    if location.kind == "path":
        assert location.path is not None
        return IndexTarget("file", path=location.path / INDEX_FILE)
    server = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{location.host}-{location.port}")
    return IndexTarget("file", path=default_data_dir() / f"memory-index-{server}.sqlite3")


def _postgres(spec: str) -> IndexTarget:
    from affect_memory.memory.index.postgres_backend import DEFAULT_SCHEMA
    from affect_memory.redaction import normalize_userinfo

    parts = urlsplit(normalize_userinfo(spec))  # a password's unencoded / or @ stays in it
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in query if name == "schema"]
    rest = [(name, value) for name, value in query if name != "schema"]
    url = urlunsplit(parts._replace(query=urlencode(rest)))
    return IndexTarget("postgresql", url=url, schema=schemas[-1] if schemas else DEFAULT_SCHEMA)


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
    lowered = spec.lower()
    if lowered.startswith(("postgresql://", "postgres://")):
        return _postgres(spec)
    if lowered.startswith("sqlite:"):
        if not lowered.startswith("sqlite:///") or len(spec) <= len("sqlite:///"):
            from affect_memory.state.location import redacted

            raise StoreError(
                f"a SQLite index URL is sqlite:///relative/path or sqlite:////absolute/path, "
                f"got {redacted(spec)!r}"
            )
        return IndexTarget("file", path=Path(spec[len("sqlite:///") :]).expanduser())
    if "://" in spec:
        from affect_memory.state.location import redacted

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
        from affect_memory.memory.index.postgres_backend import PostgresBackend

        assert target.url is not None and target.schema is not None
        return PostgresBackend(target.url, schema=target.schema, lock_timeout=lock_timeout)
    from affect_memory.memory.index.sqlite_backend import SQLiteBackend

    return SQLiteBackend(target.path if target.kind == "file" else None)
