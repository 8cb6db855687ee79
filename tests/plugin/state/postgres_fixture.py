"""Shared support for tests that need PostgreSQL: find the server, make and drop a schema.

The server is ``AFFECT_MEMORY_TEST_POSTGRES`` or, by default, the local one at
127.0.0.1:5432 (database ``test``). Where none answers, tests skip with one line saying why,
except under ``CI=true``, where a missing server (or a missing psycopg) fails the run.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

ENVIRONMENT_VARIABLE = "AFFECT_MEMORY_TEST_POSTGRES"
DEFAULT_URLS = ("postgresql://127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432/test")
"""Tried in order when the variable is unset: the OS user's role first, then ``postgres``."""


def _unavailable(reason: str) -> None:
    """Skip the test with ``reason``, or fail it under CI, where PostgreSQL must be there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL tests cannot run under CI=true: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def require_psycopg() -> None:
    """Skip the whole module (fail under CI) when psycopg is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as error:
        reason = f"psycopg is not installed ({error}); pip install 'affect-memory[postgres]'"
        if os.environ.get("CI") == "true":
            raise ImportError(f"PostgreSQL tests cannot run under CI=true: {reason}") from error
        pytest.skip(f"PostgreSQL tests skipped: {reason}", allow_module_level=True)


@functools.cache
def _probe() -> tuple[str | None, str]:
    """(a URL that answers, or None; why none did)."""
    import psycopg

    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    candidates = (configured,) if configured else DEFAULT_URLS
    reasons: list[str] = []
    for url in candidates:
        try:
            with psycopg.connect(url, connect_timeout=3, autocommit=True) as connection:
                connection.execute("SELECT 1")
        except psycopg.Error as error:
            line = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
            reasons.append(f"{url}: {line}")
            continue
        return url, ""
    source = f"${ENVIRONMENT_VARIABLE}" if configured else "the local default"
    return None, f"no server answers at {source} ({'; '.join(reasons)})"


def server_url() -> str:
    """The URL of the test server; skips (or fails under CI) when none answers."""
    url, reason = _probe()
    if url is None:
        _unavailable(reason)
    assert url is not None
    return url


def run_sql(url: str, statement: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own (autocommit); rows if it returns any."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, parameters)
        return cursor.fetchall() if cursor.description is not None else []


@contextmanager
def temporary_schema(url: str) -> Iterator[str]:
    """A fresh schema name for one test; the schema (if made) is dropped afterwards."""
    name = f"am_test_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        run_sql(url, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
