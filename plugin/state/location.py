"""Which state store a URL names, and opening it.

``sqlite:///RELATIVE/PATH`` and ``sqlite:////ABSOLUTE/PATH`` (SQLAlchemy's form, as the memory
index reads it) or a bare path open the embedded ``SQLiteStateStore``;
``postgresql://USER@HOST:PORT/DB`` (or ``postgres://``) opens a ``PostgresStateStore``. The
query string may set the store's own options — ``lock_timeout``, ``busy_timeout`` and
``synchronous`` for SQLite; ``schema``, ``lock_timeout``, ``pool_size`` and ``connect_timeout``
for PostgreSQL — and any other parameter of a PostgreSQL URL goes to libpq (``sslmode``,
``application_name``, ...). Without a URL the store is ``$AFFECT_MEMORY_STATE``, else the
embedded file ``DATA_DIR/state.db``.

A URL that names no store, an unknown scheme or option, a server that does not answer and a
schema of another version are each refused with one line naming where the URL came from; a
password in the URL is never echoed.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from affect_memory.data_dir import default_data_dir
from affect_memory.errors import MissingExtraError
from affect_memory.kernel.errors import InvalidInputError, StateStoreError, shown
from affect_memory.redaction import normalize_userinfo, redact, url_secrets

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
    "redacted",
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

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_LIBPQ_KEYWORDS = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|service|sslmode)\s*=", re.IGNORECASE
)
_FORMS = "a file path, sqlite:////ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB"


def redacted(url: str) -> str:
    """The connection string with its user-info and every password-like parameter masked."""
    return redact(url, url_secrets(url))


@dataclass(frozen=True)
class StateLocation:
    """A parsed state URL: which store, where, and the options its query string set."""

    kind: Literal["sqlite", "postgresql"]
    target: str = field(repr=False)  # a PostgreSQL URL may hold a password
    """The database file (SQLite), or the libpq URL without the store's own options."""
    options: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The file, or the URL with any password masked."""
        return self.target if self.kind == "sqlite" else redacted(self.target)


def default_state_url(data_dir: str | os.PathLike[str] | None = None) -> str:
    """``$AFFECT_MEMORY_STATE``, else ``DATA_DIR/state.db`` (``data_dir`` or the default)."""
    configured = os.environ.get(STATE_ENV)
    if configured:
        return configured
    return str(Path(data_dir if data_dir is not None else default_data_dir()) / "state.db")


def parse_state_url(url: str | os.PathLike[str], *, source: str = "url") -> StateLocation:
    """The store ``url`` names; ``source`` (``--state``, ``$AFFECT_MEMORY_STATE``) leads errors."""
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    try:
        return _parse_state_url(url, source)
    except InvalidInputError as error:
        message = str(error)
        masked = redact(message, url_secrets(url)) if isinstance(url, str) else message
        if masked == message:
            raise
        raise InvalidInputError(masked) from None  # a fragment of a password, quoted


def _parse_state_url(url: object, source: str) -> StateLocation:
    if not isinstance(url, str):
        raise InvalidInputError(f"{source} must be {_FORMS}, got {shown(url)}")
    text = url.strip()
    if not text:
        raise InvalidInputError(f"{source} is empty: give {_FORMS}")
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise InvalidInputError(
            f"{source} contains a control character: {shown(redacted(text))}"
        )
    match = _SCHEME.match(text)
    scheme = match.group(1).lower() if match else ""
    if scheme == "sqlite":
        return _sqlite_url(text, source)
    if scheme in ("postgresql", "postgres"):
        return _postgres_url(text, source)
    if match and text[match.end() :].startswith("//"):
        hint = " (write postgresql://...)" if scheme.startswith("postgres") else ""
        raise InvalidInputError(
            f"{source} has the unknown scheme {scheme!r}{hint}: give {_FORMS}, got "
            f"{shown(redacted(text))}"
        )
    if _LIBPQ_KEYWORDS.match(text):
        raise InvalidInputError(
            f"{source} looks like a libpq keyword string, not a file path: write it as a URL, "
            f"postgresql://USER@HOST:PORT/DB, got {shown(redacted(text))}"
        )
    return StateLocation("sqlite", str(Path(text).expanduser()))


def _options(
    pairs: list[tuple[str, str]], allowed: Mapping[str, type], source: str
) -> dict[str, Any]:
    """Typed store options from query pairs; unknown, repeated or malformed ones are refused."""
    options: dict[str, Any] = {}
    for key, value in pairs:
        if key not in allowed:
            raise InvalidInputError(
                f"{source} has the unknown option {shown(key)}; known: {', '.join(allowed)}"
            )
        if key in options:
            raise InvalidInputError(f"{source} gives {key} twice")
        kind = allowed[key]
        if kind is str:
            options[key] = value
            continue
        try:
            number = kind(value)
        except ValueError:
            what = "a whole number" if kind is int else "a number of seconds"
            raise InvalidInputError(
                f"{source}: {key} must be {what}, got {shown(value)}"
            ) from None
        if isinstance(number, float) and not math.isfinite(number):
            raise InvalidInputError(f"{source}: {key} must be finite, got {shown(value)}")
        options[key] = number
    return options


def _query_pairs(query: str, source: str) -> list[tuple[str, str]]:
    """``key=value`` pairs of a query string, each percent-decoded."""
    pairs: list[tuple[str, str]] = []
    for part in query.split("&") if query else []:
        key, equals, value = part.partition("=")
        if not key or not equals:
            raise InvalidInputError(
                f"{source} has a malformed query parameter {shown(part)} (want key=value)"
            )
        pairs.append((unquote(key), unquote(value)))
    return pairs


def _sqlite_url(text: str, source: str) -> StateLocation:
    head, _, query = text.partition("?")
    if "#" in text:
        raise InvalidInputError(
            f"{source} has a #fragment; pass a path with # in it as a bare path: {shown(text)}"
        )
    if not head.lower().startswith("sqlite:///"):
        slashed = head.lower().startswith("sqlite://")
        host = head[len("sqlite://") :].partition("/")[0] if slashed else ""
        where = f"names the host {shown(host)}, but a SQLite file is local" if host else "is not"
        raise InvalidInputError(
            f"{source} {where} a SQLite URL: write sqlite:///RELATIVE/PATH, "
            f"sqlite:////ABSOLUTE/PATH or a bare path, got {shown(text)}"
        )
    path = head[len("sqlite:///") :]
    if not path or path == "/":
        raise InvalidInputError(
            f"{source} names no file: write sqlite:///RELATIVE/PATH or sqlite:////ABSOLUTE/PATH, "
            f"got {shown(text)}"
        )
    options = _options(_query_pairs(query, source), SQLITE_OPTIONS, source)
    return StateLocation("sqlite", str(Path(path).expanduser()), options)


def _postgres_url(text: str, source: str) -> StateLocation:
    text = normalize_userinfo(text)  # a password with an unencoded / or @ reaches libpq whole
    head, question, query = text.partition("?")
    if "#" in query or "#" in head.partition("@")[2]:
        raise InvalidInputError(
            f"{source} has a #fragment, which a PostgreSQL URL cannot have: "
            f"{shown(redacted(text))}"
        )
    kept: list[str] = []
    own: list[tuple[str, str]] = []
    for part, (key, value) in zip(
        query.split("&") if query else [], _query_pairs(query, source), strict=True
    ):
        if key in POSTGRES_OPTIONS:
            own.append((key, value))
        else:
            kept.append(part)
    target = head + (question + "&".join(kept) if kept else "")
    if head.lower().startswith("postgres:"):
        target = "postgresql:" + target[len("postgres:") :]
    options = _options(own, POSTGRES_OPTIONS, source)
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise MissingExtraError(
            f"{source} names a PostgreSQL store, which needs psycopg 3: "
            "pip install 'affect-memory[postgres]'"
        ) from None
    try:
        conninfo_to_dict(target)
    except PsycopgError as error:
        reason = redact(" ".join(str(error).split()), url_secrets(text))
        raise InvalidInputError(
            f"{source} is not a usable PostgreSQL URL ({reason}): "
            f"{shown(redacted(text))}"
        ) from None
    return StateLocation("postgresql", target, options)


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
