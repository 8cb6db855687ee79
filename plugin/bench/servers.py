"""The servers a benchmark runs against: a ``chroma run`` or an ``affect-memory serve`` it starts
on a free 127.0.0.1 port and stops by PID, and a PostgreSQL schema of its own on a server it is
given, dropped afterwards.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.errors import StoreUnavailableError
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.state.location import STATE_ENV, StateLocation, parse_state_url

__all__ = [
    "ChromaServer",
    "api_server",
    "bench_schema",
    "chroma_server",
    "free_port",
    "require_empty_index",
    "stop_process",
    "with_schema",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class ChromaServer:
    """A running ``chroma run``: its URL and process id."""

    url: str
    pid: int


def chroma_command() -> str:
    beside = Path(sys.executable).with_name("chroma")
    if beside.exists():
        return str(beside)
    found = shutil.which("chroma")
    if found is None:
        raise StoreUnavailableError(
            f"the chroma CLI is neither next to {sys.executable} nor on PATH; install chromadb"
        )
    return found


@contextmanager
def chroma_server(data: Path, *, startup_timeout: float = 60.0) -> Iterator[ChromaServer]:
    """``chroma run`` on ``data`` at a free 127.0.0.1 port, stopped by PID on the way out."""
    port = free_port()
    log_path = data / "chroma-server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [chroma_command(), "run", "--host", "127.0.0.1", "--port", str(port), "--path",
             str(data)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + startup_timeout
            while not _answers(url):
                if process.poll() is not None:
                    raise StoreUnavailableError(
                        f"chroma run exited with status {process.returncode}; see {log_path}"
                    )
                if time.monotonic() > deadline:
                    raise StoreUnavailableError(
                        f"chroma run did not answer within {startup_timeout:g} s; see {log_path}"
                    )
                time.sleep(0.2)
            yield ChromaServer(url, process.pid)
        finally:
            stop_process(process)


@contextmanager
def api_server(data_dir: Path, *, token: str, startup_timeout: float = 180.0) -> Iterator[str]:
    """``affect-memory serve --data-dir DATA_DIR --port 0``: its URL once it prints that it
    listens (it loads the model first), stopped by PID on the way out.

    The server requires ``token``, given in its environment (a command line is visible to other
    users), and takes neither the caller's index nor state setting: it serves the store in
    ``data_dir`` with the index inside it. Its output goes to files in ``data_dir``.
    """
    from affect_memory.http.exposure import TOKEN_ENV
    from affect_memory.http.server import LISTENING
    from affect_memory.memory.index.storage.opening import INDEX_ENV

    out_path, log_path = data_dir / "serve.stdout", data_dir / "serve.log"
    env = {name: value for name, value in os.environ.items() if name not in (INDEX_ENV, STATE_ENV)}
    env.update({TOKEN_ENV: token, "ANONYMIZED_TELEMETRY": "False"})
    command = [sys.executable, "-m", "affect_memory.cli", "serve", "--data-dir", str(data_dir),
               "--port", "0"]  # fmt: skip
    with out_path.open("wb") as out, log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=log, env=env
        )
        try:
            deadline = time.monotonic() + startup_timeout
            while not (url := _announced(out_path, LISTENING)):
                if process.poll() is not None:
                    raise StoreUnavailableError(
                        f"affect-memory serve exited with status {process.returncode}: "
                        f"{_last_line(log_path)}"
                    )
                if time.monotonic() > deadline:
                    raise StoreUnavailableError(
                        f"affect-memory serve did not listen within {startup_timeout:g} s: "
                        f"{_last_line(log_path)}"
                    )
                time.sleep(0.2)
            yield url
        finally:
            stop_process(process)


def _announced(out_path: Path, prefix: str) -> str:
    """The URL after ``prefix`` on a line the server printed, or "" before it prints one."""
    for line in out_path.read_text("utf-8", "replace").splitlines():
        if line.startswith(prefix):
            return line.removeprefix(prefix).strip()
    return ""


def _last_line(log_path: Path) -> str:
    """The last line the server wrote to stderr: what a one-line error can say of its end."""
    lines = log_path.read_text("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "(it wrote nothing to stderr)"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def stop_process(process: subprocess.Popen[bytes], *, patience: float = 15.0) -> None:
    """Stop a server by its PID: SIGCONT (a test may have left it stopped), SIGTERM, then
    SIGKILL if it has not exited within ``patience`` seconds."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGCONT)
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=patience)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``schema=`` added to its query string."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@contextmanager
def bench_schema(
    url: str, *, prefix: str, source: str = "--state", store: bool = True
) -> Iterator[str]:
    """The state URL of a schema for one run on the PostgreSQL server ``url`` names.

    The URL's own ``?schema=`` is used if it gives one, else a fresh ``PREFIX_<hex>``; the
    schema must hold no conversations yet, and one the run created is dropped afterwards.
    ``store=False`` only names a fresh schema (for something else to create) and drops it.
    """
    location = parse_state_url(url, source=source)
    if location.kind != "postgresql":
        raise InvalidInputError(
            f"{source} must name a PostgreSQL server (postgresql://USER@HOST:PORT/DB), got "
            f"{shown(location.describe())}"
        )
    import psycopg

    named = location.options.get("schema") if store else None
    schema = str(named) if named else f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    base = location.target if not store else url
    store_url = url if named else with_schema(base, schema)
    existed = _schema_exists(location, schema)
    try:
        from affect_memory.state.location import open_state_store

        if store:
            open_state_store(store_url, source=source).close()  # migrate, or refuse a version
        if store and existed and _count(location, f'SELECT count(*) FROM "{schema}".conversations'):
            raise InvalidInputError(
                f"{source}: schema {schema!r} already holds conversations; a benchmark needs a "
                "new or empty schema"
            )
        yield store_url
    finally:
        if not existed:
            # An unreachable server (or one that went away) has nothing of ours to drop.
            with suppress(psycopg.Error):
                _sql(location, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def require_empty_index(spec: str, *, source: str = "--index") -> None:
    """Refuse a memory index that already indexes users: a benchmark would write its rows
    into it and leave them there. Reads only (a missing file or schema is empty)."""
    import sqlite3

    from affect_memory.memory.chroma.location import IN_MEMORY, parse_location
    from affect_memory.memory.index.storage.opening import resolve_index

    target = resolve_index(spec, parse_location(IN_MEMORY))  # an explicit index: any will do
    users = 0
    if target.kind == "postgresql":
        assert target.url is not None
        location = parse_state_url(target.url, source=source)
        table = f'"{target.schema}".index_users'
        if _sql(location, "SELECT to_regclass(%s)", (table,))[0][0] is not None:
            users = _count(location, f"SELECT count(*) FROM {table}")
    elif target.kind == "file" and target.path is not None and target.path.exists():
        with closing(sqlite3.connect(f"{target.path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'index_users'"
            ).fetchone()
            users = db.execute("SELECT count(*) FROM index_users").fetchone()[0] if found else 0
    if users:
        raise InvalidInputError(
            f"{source}: the memory index {target.describe()} already indexes {users:,} "
            f"user{'s' if users != 1 else ''}; a benchmark needs a new or empty index"
        )


def _sql(location: StateLocation, statement: str, params: tuple[Any, ...] = ()) -> Any:
    import psycopg

    with psycopg.connect(location.target, autocommit=True, connect_timeout=10) as connection:
        cursor = connection.execute(statement, params)
        return cursor.fetchall() if cursor.description is not None else None


def _schema_exists(location: StateLocation, schema: str) -> bool:
    import psycopg

    try:
        rows = _sql(location, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    except psycopg.Error:
        return False  # unreachable: opening the store says so in one line
    return bool(rows)


def _count(location: StateLocation, statement: str) -> int:
    rows = _sql(location, statement)
    return int(rows[0][0]) if rows else 0
