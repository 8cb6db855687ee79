"""Servers for the HTTP API tests, each started once per session and stopped by PID.

``embedded_api``: ``affect-memory serve`` over an embedded Chroma store with the default
SQLite state file. ``chroma_api``: over a ``chroma run`` server (its own collection prefix, so
the session's shared server holds nothing else of it) with the state in a PostgreSQL schema
of its own (dropped after) and the memory index in a SQLite file the test process can open
too. Tests use users of their own, so they do not depend on each other's order.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.plugin.http.serve_process import ServeProcess, running_serve
from tests.plugin.state.postgres_fixture import require_psycopg, server_url, temporary_schema


@dataclass
class Api:
    """A running server, a client of it, and where it keeps its data."""

    kind: str
    """``embedded`` (embedded Chroma, SQLite state) or ``chroma`` (Chroma server, PostgreSQL)."""
    process: ServeProcess
    client: httpx.Client
    data_dir: Path
    state: str
    """The state store's URL (a file path for SQLite)."""
    chroma: str | None = None
    index: Path | None = None
    collection: str = "memories"

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.process.url


@pytest.fixture(scope="session")
def embedded_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """The API over an embedded Chroma store and the default SQLite state file."""
    data = tmp_path_factory.mktemp("api-embedded")
    with running_serve(data, "--timeout", "60") as process, httpx.Client(
        base_url=process.url, timeout=120
    ) as client:
        yield Api("embedded", process, client, data, str(data / "state.db"))


@pytest.fixture(scope="session")
def chroma_api(tmp_path_factory: pytest.TempPathFactory, chroma_server: str) -> Iterator[Api]:
    """The API over a Chroma server, with the state in PostgreSQL (skipped, saying why, when
    no PostgreSQL answers, except under CI=true)."""
    require_psycopg()
    database = server_url()
    data = tmp_path_factory.mktemp("api-chroma")
    collection = f"api{secrets.token_hex(4)}"
    index = data / "index.sqlite3"
    with temporary_schema(database) as schema:
        state = f"{database}{'&' if '?' in database else '?'}schema={schema}"
        arguments = ("--chroma", chroma_server, "--collection", collection, "--index", str(index))
        with running_serve(
            data, *arguments, "--state", state, "--timeout", "60"
        ) as process, httpx.Client(base_url=process.url, timeout=120) as client:
            yield Api("chroma", process, client, data, state, chroma_server, index, collection)
