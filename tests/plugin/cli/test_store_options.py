"""``--state URL`` / ``$AFFECT_MEMORY_STATE`` on every command that opens a state store: a bad
URL, a server that does not answer and a schema of another version each exit 2 with one line,
before anything is served or measured; the demo runs on the store the URL names."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.cli.demo import SAMPLE_MEMORIES
from affect_memory.data_dir import DATA_DIR_ENV
from affect_memory.state.location import STATE_ENV
from affect_memory.state.sqlite import SQLiteStateStore
from tests.plugin.state.postgres_fixture import (
    require_psycopg,
    run_sql,
    server_url,
    temporary_schema,
)

COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "chat": lambda home: [
        "chat", "--model-url", "http://127.0.0.1:9/v1", "--model", "m", "--data-dir", str(home)
    ],
    "mcp": lambda home: ["mcp", "--data-dir", str(home)],
    "demo": lambda home: ["demo", "--data-dir", str(home)],
    "bench engine": lambda home: ["bench", "engine", "--quick"],
    "bench fleet": lambda home: ["bench", "fleet", "--quick"],
}  # fmt: skip
"""Each command that opens a state store, with the arguments it needs to get that far."""


@pytest.fixture(autouse=True)
def _no_configured_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATE_ENV, raising=False)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _newer_sqlite_file(tmp_path: Path) -> Path:
    db = tmp_path / "newer.db"
    SQLiteStateStore(db).close()
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA user_version = 99")
    return db


def _one_error_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"affect-memory {command.split()[0]}: ")
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_state_url_exits_2_with_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*COMMANDS[command](tmp_path), "--state", "mysql://me:s3cret@db/affect"]
    assert main(argv) == 2
    line = _one_error_line(capsys, command)
    assert "--state has the unknown scheme 'mysql'" in line and "s3cret" not in line
    assert not (tmp_path / "state.db").exists()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unreachable_server_exits_2_with_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_psycopg()
    port = _closed_port()
    argv = [*COMMANDS[command](tmp_path), "--state", f"postgresql://127.0.0.1:{port}/test"]
    assert main(argv) == 2
    line = _one_error_line(capsys, command)
    assert f"--state: cannot connect to PostgreSQL at postgresql://127.0.0.1:{port}/test" in line


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "bench fleet"])
def test_a_sqlite_file_of_a_newer_schema_exits_2_with_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _newer_sqlite_file(tmp_path)
    if command == "bench engine":  # it measures SQLite in files of its own
        argv = [*COMMANDS[command](tmp_path), "--state", f"sqlite:///{db}"]
        assert main(argv) == 2
        assert "bench engine measures SQLite in a temporary directory" in _one_error_line(
            capsys, command
        )
        return
    assert main([*COMMANDS[command](tmp_path), "--state", f"sqlite:///{db}"]) == 2
    assert f"{db} has schema version 99" in _one_error_line(capsys, command)


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    require_psycopg()
    url = server_url()
    with temporary_schema(url) as schema:
        yield url, schema


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_postgresql_schema_of_a_newer_version_exits_2_with_one_line(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pg_schema: tuple[str, str],
) -> None:
    from affect_memory.state.postgres import PostgresStateStore

    url, schema = pg_schema
    PostgresStateStore(url, schema=schema).close()
    run_sql(url, f"INSERT INTO \"{schema}\".schema_version VALUES (99, 'from the future')")
    argv = [*COMMANDS[command](tmp_path), "--state", f"{url}?schema={schema}"]
    assert main(argv) == 2
    line = _one_error_line(capsys, command)
    assert f"PostgreSQL schema '{schema}'" in line and "has schema version 99" in line


@pytest.mark.parametrize("command", ["chat", "mcp", "demo"])
def test_the_environment_names_the_store_when_no_flag_does(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(STATE_ENV, "sqlite://db.example/state.db")
    assert main(COMMANDS[command](tmp_path)) == 2
    assert "$AFFECT_MEMORY_STATE names the host 'db.example'" in _one_error_line(capsys, command)
    newer = _newer_sqlite_file(tmp_path)  # --state wins over the environment
    assert main([*COMMANDS[command](tmp_path), "--state", str(newer)]) == 2
    assert f"{newer} has schema version 99" in _one_error_line(capsys, command)


def test_the_demo_commits_to_the_postgresql_schema_the_url_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_schema: tuple[str, str]
) -> None:
    url, schema = pg_schema
    assert main(["demo", "--data-dir", str(tmp_path), "--state", f"{url}?schema={schema}"]) == 0
    out = capsys.readouterr().out
    assert f"(schema {schema})" in out and "state.db" not in out
    [(conversation,)] = run_sql(url, f'SELECT DISTINCT conversation_id FROM "{schema}".messages')
    assert conversation.startswith("alice-demo-")
    roles = run_sql(
        url,
        f'SELECT role FROM "{schema}".messages WHERE conversation_id = %s ORDER BY seq',
        (conversation,),
    )
    assert len(roles) >= 2 and [role for (role,) in roles[:2]] == ["user", "assistant"]
    assert run_sql(url, f'SELECT count(*) FROM "{schema}".conversations') == [(1,)]
    assert not (tmp_path / "demo" / "state.db").exists()


# ---------------------------------------------------------------- --index / $AFFECT_MEMORY_INDEX

SAMPLE = SAMPLE_MEMORIES


def test_the_memory_commands_use_the_index_that_index_or_the_environment_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from affect_memory.memory.index.storage.opening import INDEX_ENV, INDEX_FILE

    index = tmp_path / "elsewhere" / "index.sqlite3"
    home = ["--data-dir", str(tmp_path)]
    assert main(["ingest", str(SAMPLE), *home, "--index", str(index), "--no-progress"]) == 0
    assert index.exists() and not (tmp_path / "chroma" / INDEX_FILE).exists()
    capsys.readouterr()
    monkeypatch.setenv(INDEX_ENV, f"sqlite:///{index}")
    assert main(["recall", "Where do I live now?", "--user-id", "alice", *home, "--json"]) == 0
    assert "alice-home-new" in capsys.readouterr().out
    assert not (tmp_path / "chroma" / INDEX_FILE).exists()  # the environment's index was used


@pytest.mark.parametrize(
    ("setting", "source"), [("flag", "--index"), ("environment", "$AFFECT_MEMORY_INDEX")]
)
def test_a_bad_index_exits_2_with_one_line_naming_where_it_came_from(
    setting: str,
    source: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from affect_memory.memory.index.storage.opening import INDEX_ENV

    argv = ["stats", "--data-dir", str(tmp_path)]
    if setting == "flag":
        argv += ["--index", "mysql://me:s3cret@db/affect"]
    else:
        monkeypatch.setenv(INDEX_ENV, "mysql://me:s3cret@db/affect")
    assert main(argv) == 2
    line = _one_error_line(capsys, "stats")
    assert f"{source}: index must be postgresql://" in line and "s3cret" not in line
