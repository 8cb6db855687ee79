"""A state URL picks the store: ``sqlite:////PATH`` or a bare path, ``postgresql://...``; the
default is ``$AFFECT_MEMORY_STATE``, else ``DATA_DIR/state.db``; every bad URL is one line."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from affect_memory import SQLiteStateStore, open_state_store
from affect_memory.data_dir import DATA_DIR_ENV
from affect_memory.kernel import InvalidInputError, StateStoreError
from affect_memory.kernel.protocols import Message
from affect_memory.state.location import STATE_ENV, parse_state_url, state_store_label
from tests.plugin.state.postgres_fixture import (
    require_psycopg,
    run_sql,
    server_url,
    temporary_schema,
)


@pytest.fixture(autouse=True)
def _no_configured_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATE_ENV, raising=False)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _say(store: object, conversation: str, text: str) -> None:
    async with store.transaction(conversation) as transaction:  # type: ignore[attr-defined]
        await transaction.commit(state=None, messages=[Message(role="user", content=text)])


def _contents(db: Path) -> list[str]:
    with sqlite3.connect(db) as connection:
        return [row[0] for row in connection.execute("SELECT content FROM messages ORDER BY seq")]


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("state.db", "state.db"),
        ("dir/state.db", "dir/state.db"),
        ("/srv/affect/state.db", "/srv/affect/state.db"),
        ("sqlite:///dir/state.db", "dir/state.db"),
        ("sqlite:////srv/affect/state.db", "/srv/affect/state.db"),
        ("SQLITE:////srv/affect/state.db", "/srv/affect/state.db"),
        ("sqlite:////srv/my dir/state%.db", "/srv/my dir/state%.db"),
        ("  sqlite:////srv/state.db\r\n", "/srv/state.db"),
        ("a:b.db", "a:b.db"),
    ],
)
def test_a_path_or_sqlite_url_names_a_file(url: str, path: str) -> None:
    location = parse_state_url(url)
    assert (location.kind, location.target, dict(location.options)) == ("sqlite", path, {})


def test_a_sqlite_url_sets_the_stores_options() -> None:
    location = parse_state_url("sqlite:///s.db?lock_timeout=5&busy_timeout=2.5&synchronous=FULL")
    assert dict(location.options) == {
        "lock_timeout": 5.0,
        "busy_timeout": 2.5,
        "synchronous": "FULL",
    }


def test_a_postgresql_url_keeps_libpq_parameters_and_takes_the_stores_own() -> None:
    require_psycopg()
    location = parse_state_url(
        "postgres://me:pw@db.example:5433/affect?schema=fleet&sslmode=require"
        "&application_name=a%20b&lock_timeout=4&pool_size=3&connect_timeout=2"
    )
    assert location.kind == "postgresql"
    assert location.target == (
        "postgresql://me:pw@db.example:5433/affect?sslmode=require&application_name=a%20b"
    )
    assert dict(location.options) == {
        "schema": "fleet",
        "lock_timeout": 4.0,
        "pool_size": 3,
        "connect_timeout": 2.0,
    }
    assert "pw" not in location.describe() and "***" in location.describe()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("mysql://me:s3cret@db/affect", "unknown scheme 'mysql'"),
        ("postgresql+psycopg://db/affect", r"scheme 'postgresql\+psycopg' \(write postgresql"),
        ("http://127.0.0.1:8000", "unknown scheme 'http'"),
        ("sqlite://db.example/state.db", "names the host 'db.example'"),
        ("sqlite:///", "names no file"),
        ("sqlite:////", "names no file"),
        ("sqlite:state.db", "is not a SQLite URL: write sqlite:///RELATIVE/PATH"),
        ("sqlite:///srv/s.db#x", "#fragment"),
        ("sqlite:///srv/s.db?timeout=3", "unknown option 'timeout'; known: lock_timeout"),
        ("sqlite:///srv/s.db?lock_timeout=soon", "lock_timeout must be a number of seconds"),
        ("sqlite:///srv/s.db?lock_timeout=inf", "lock_timeout must be finite"),
        ("sqlite:///srv/s.db?lock_timeout=1&lock_timeout=2", "gives lock_timeout twice"),
        ("sqlite:///srv/s.db?lock_timeout", "malformed query parameter 'lock_timeout'"),
        ("host=db.example dbname=affect password=s3cret", "libpq keyword string"),
        ("state\x00.db", "control character"),
        ("postgresql://me:s3cret@db/affect?pool_size=2.5", "pool_size must be a whole number"),
        ("postgresql://me:s3cret@db/affect?colour=blue", 'invalid URI query parameter: "colour"'),
        ("postgresql://me:s3cret@[::1/affect", "not a usable PostgreSQL URL"),
    ],
)
def test_a_bad_url_is_refused_in_one_line_naming_its_source_and_never_the_password(
    url: str, expected: str
) -> None:
    if url.startswith("postgresql:"):
        require_psycopg()
    with pytest.raises(InvalidInputError, match=expected) as caught:
        parse_state_url(url, source="--state")
    message = str(caught.value)
    assert message.startswith("--state") and "\n" not in message
    assert "s3cret" not in message


def test_a_path_object_is_a_sqlite_file(tmp_path: Path) -> None:
    assert parse_state_url(tmp_path / "x?.db").target == str(tmp_path / "x?.db")


def test_a_home_directory_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_state_url("~/state.db").target == str(tmp_path / "state.db")
    assert parse_state_url("sqlite:///~/state.db").target == str(tmp_path / "state.db")


async def test_open_state_store_opens_sqlite_by_url_and_by_path(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    by_url = open_state_store(f"sqlite:///{db}?lock_timeout=7")
    by_path = open_state_store(db)
    try:
        assert isinstance(by_url, SQLiteStateStore) and by_url.lock_timeout == 7.0
        assert by_url.path == db and state_store_label(by_url) == str(db)
        await _say(by_url, "c1", "one")
        await _say(by_path, "c1", "two")
    finally:
        by_url.close()
        by_path.close()
    assert _contents(db) == ["one", "two"]


async def test_without_a_url_the_store_is_the_environments_else_the_data_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default = open_state_store()
    assert default.path == Path(".affect-memory/state.db")  # type: ignore[union-attr]
    default.close()
    in_data_dir = open_state_store(data_dir=tmp_path / "home")
    assert in_data_dir.path == tmp_path / "home" / "state.db"  # type: ignore[union-attr]
    in_data_dir.close()
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "elsewhere"))
    from_home = open_state_store()
    assert from_home.path == tmp_path / "elsewhere" / "state.db"  # type: ignore[union-attr]
    from_home.close()
    monkeypatch.setenv(STATE_ENV, f"sqlite:///{tmp_path}/chosen.db")
    chosen = open_state_store(data_dir=tmp_path / "home")
    try:
        assert chosen.path == tmp_path / "chosen.db"  # type: ignore[union-attr]
        await _say(chosen, "c1", "here")
    finally:
        chosen.close()
    assert _contents(tmp_path / "chosen.db") == ["here"]


def test_a_bad_url_in_the_environment_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_ENV, "mysql://db/affect")
    with pytest.raises(InvalidInputError, match=r"^\$AFFECT_MEMORY_STATE has the unknown scheme"):
        open_state_store()


def test_an_explicit_files_directory_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(StateStoreError, match="lock directory"):
        open_state_store(tmp_path / "missing" / "state.db")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("sqlite:///x.db?lock_timeout=1", {"lock_timeout": 2.0}, "lock_timeout is given both"),
        ("x.db", {"schema": "s"}, "schema is not an option of the sqlite state store"),
        ("x.db", {"lock_timeout": 0}, "lock_timeout must be positive"),
    ],
)
def test_bad_options_are_refused(
    tmp_path: Path, url: str, options: dict[str, object], expected: str
) -> None:
    with pytest.raises(InvalidInputError, match=expected):
        open_state_store(url if url.startswith("sqlite") else tmp_path / url, **options)


def test_a_sqlite_file_of_a_newer_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    SQLiteStateStore(db).close()
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA user_version = 9")
    with pytest.raises(StateStoreError, match="schema version 9") as caught:
        open_state_store(f"sqlite:///{db}", source="--state")
    assert "\n" not in str(caught.value)


# -- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    require_psycopg()
    url = server_url()
    with temporary_schema(url) as schema:
        yield url, schema


async def test_a_postgresql_url_opens_the_server_store_in_the_schema_it_names(
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    store = open_state_store(f"{url}?schema={schema}&lock_timeout=0.5&pool_size=2")
    other = open_state_store(url, schema=schema)
    try:
        assert type(store).__name__ == "PostgresStateStore"
        assert store.schema == schema and store.lock_timeout == 0.5  # type: ignore[union-attr]
        assert state_store_label(store).endswith(f"(schema {schema})")
        await _say(store, "c1", "over the wire")
        async with other.transaction("c1") as transaction:
            assert [m.content for m in await transaction.load_transcript()] == ["over the wire"]
    finally:
        store.close()
        other.close()
    assert run_sql(url, f'SELECT content FROM "{schema}".messages') == [("over the wire",)]


def test_an_unreachable_server_is_one_line_naming_the_source() -> None:
    require_psycopg()
    port = _free_port()
    with pytest.raises(StateStoreError, match=f"^--state: cannot connect to PostgreSQL .*:{port}"):
        open_state_store(f"postgresql://me:s3cret@127.0.0.1:{port}/test", source="--state")


def test_a_postgresql_schema_of_a_newer_version_is_refused_in_one_line(
    pg_schema: tuple[str, str],
) -> None:
    url, schema = pg_schema
    open_state_store(url, schema=schema).close()
    run_sql(url, f"INSERT INTO \"{schema}\".schema_version VALUES (99, 'from the future')")
    with pytest.raises(StateStoreError, match="schema version 99") as caught:
        open_state_store(f"{url}?schema={schema}", source="--state")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("--state: ")

