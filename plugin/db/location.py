"""Where a database lives: a SQLite file or a PostgreSQL URL, parsed one way for every store.

``sqlite:///RELATIVE/PATH`` and ``sqlite:////ABSOLUTE/PATH`` (SQLAlchemy's form) or a bare
path name a SQLite file; ``postgresql://USER@HOST:PORT/DB`` (or ``postgres://``) names a
PostgreSQL database. The query string may set the caller's own options, typed as the caller
declares them (the state store's ``lock_timeout``, the index's ``schema``, ...); any other
parameter of a PostgreSQL URL is libpq's (``sslmode``, ``application_name``, ...) and stays in
the URL, which libpq's own parser checks. A SQLite URL takes the caller's options only.

Users: ``affect_memory.state.location`` (the state store) and
``affect_memory.memory.index.storage.opening`` (the memory index). A refusal is one
``InvalidInputError`` line led by ``source`` (``--state``, ``$AFFECT_MEMORY_STATE``,
``index``, ...); a password in the URL is never echoed (``affect_memory.redaction``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from affect_memory.errors import MissingExtraError
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.redaction import normalize_userinfo, redact, url_secrets

__all__ = [
    "DatabaseKind",
    "DatabaseLocation",
    "parse_database_url",
    "redacted",
    "url_scheme",
]

DatabaseKind = Literal["sqlite", "postgresql"]
"""Which database a location names."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_LIBPQ_KEYWORDS = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|service|sslmode)\s*=", re.IGNORECASE
)
_FORMS = "a file path, sqlite:////ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB"


def redacted(url: str) -> str:
    """The connection string with its user-info and every password-like parameter masked."""
    return redact(url, url_secrets(url))


def url_scheme(text: str) -> str:
    """The lower-case scheme ``text`` starts with (``sqlite``, ``postgresql``, ...), else ``""``."""
    match = _SCHEME.match(text)
    return match.group(1).lower() if match else ""


@dataclass(frozen=True)
class DatabaseLocation:
    """A parsed database URL: which database, where, and the options its query string set."""

    kind: DatabaseKind
    target: str = field(repr=False)  # a PostgreSQL URL may hold a password
    """The database file (SQLite), or the libpq URL without the caller's own options."""
    options: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The file, or the URL with any password masked."""
        return self.target if self.kind == "sqlite" else redacted(self.target)


def parse_database_url(
    url: str | os.PathLike[str],
    *,
    source: str,
    sqlite_options: Mapping[str, type],
    postgres_options: Mapping[str, type],
) -> DatabaseLocation:
    """The database ``url`` names, with the options (of the types given) its query string sets.

    ``source`` (``--state``, ``$AFFECT_MEMORY_STATE``, ``index``) leads every refusal.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    try:
        return _parse(url, source, sqlite_options, postgres_options)
    except InvalidInputError as error:
        message = str(error)
        masked = redact(message, url_secrets(url)) if isinstance(url, str) else message
        if masked == message:
            raise
        raise InvalidInputError(masked) from None  # a fragment of a password, quoted


def _parse(
    url: object,
    source: str,
    sqlite_options: Mapping[str, type],
    postgres_options: Mapping[str, type],
) -> DatabaseLocation:
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
        return _sqlite_url(text, source, sqlite_options)
    if scheme in ("postgresql", "postgres"):
        return _postgres_url(text, source, postgres_options)
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
    return DatabaseLocation("sqlite", str(Path(text).expanduser()))


def _options(
    pairs: list[tuple[str, str]], allowed: Mapping[str, type], source: str
) -> dict[str, Any]:
    """Typed options from query pairs; unknown, repeated or malformed ones are refused."""
    options: dict[str, Any] = {}
    for key, value in pairs:
        if key not in allowed:
            raise InvalidInputError(
                f"{source} has the unknown option {shown(key)}; known: "
                f"{', '.join(allowed) or 'none'}"
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


def _sqlite_url(text: str, source: str, allowed: Mapping[str, type]) -> DatabaseLocation:
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
    options = _options(_query_pairs(query, source), allowed, source)
    return DatabaseLocation("sqlite", str(Path(path).expanduser()), options)


def _postgres_url(text: str, source: str, allowed: Mapping[str, type]) -> DatabaseLocation:
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
        if key in allowed:
            own.append((key, value))
        else:
            kept.append(part)
    target = head + (question + "&".join(kept) if kept else "")
    if head.lower().startswith("postgres:"):
        target = "postgresql:" + target[len("postgres:") :]
    options = _options(own, allowed, source)
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
    return DatabaseLocation("postgresql", target, options)
