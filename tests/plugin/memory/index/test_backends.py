"""Both index databases migrate idempotently with a version table, refuse a newer or foreign
schema in one line, roll a failed transaction back whole, and hold user locks that die with
their process (a killed writer never blocks a user)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from affect_memory.errors import StoreError
from affect_memory.memory.index.storage.backend import Backend
from affect_memory.memory.index.storage.opening import IndexTarget, open_backend
from affect_memory.memory.index.storage.schema import SCHEMA_VERSION, TABLES
from tests.plugin.state.postgres_fixture import run_sql, server_url, temporary_schema

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexTarget]:
    if request.param == "sqlite":
        yield IndexTarget("file", path=tmp_path / "index.sqlite3")
        return
    url = server_url()
    with temporary_schema(url) as schema:
        yield IndexTarget("postgresql", url=url, schema=schema)


def opened(target: IndexTarget) -> Backend:
    return open_backend(target, lock_timeout=5.0)


def test_opening_migrates_once_and_records_the_version(target: IndexTarget) -> None:
    first, second = opened(target), opened(target)
    try:
        rows = second.read(
            lambda tx: tx.rows("SELECT version FROM index_schema_version ORDER BY version")
        )
        assert rows == [(version,) for version in range(1, SCHEMA_VERSION + 1)]  # each once
        assert second.read(lambda tx: tx.existing_tables(list(TABLES))) == set(TABLES)
    finally:
        first.close()
        second.close()


def test_a_newer_schema_is_refused_in_one_line(target: IndexTarget) -> None:
    backend = opened(target)
    backend.write(
        lambda tx: tx.run(
            "INSERT INTO index_schema_version (version, description) VALUES (?, ?)",
            (SCHEMA_VERSION + 1, "from the future"),
        )
    )
    backend.close()
    newer = rf"schema version {SCHEMA_VERSION + 1}; this .* reads"
    with pytest.raises(StoreError, match=newer) as raised:
        opened(target)
    assert "\n" not in str(raised.value)


def test_foreign_tables_with_the_index_names_are_refused(target: IndexTarget) -> None:
    if target.kind == "file":
        import sqlite3

        assert target.path is not None
        with sqlite3.connect(target.path) as connection:
            connection.execute("CREATE TABLE index_docs (x INTEGER)")
    else:
        assert target.url is not None
        run_sql(target.url, f'CREATE SCHEMA "{target.schema}"')
        run_sql(target.url, f'CREATE TABLE "{target.schema}".index_docs (x integer)')
    with pytest.raises(StoreError, match=r"holds tables \(index_docs\) but no index_schema"):
        opened(target)


def test_a_failed_transaction_leaves_nothing(target: IndexTarget) -> None:
    backend = opened(target)
    try:

        def half(tx: Any) -> None:
            tx.run(
                "INSERT INTO index_users (user_key, collection, collection_id, user_id, analyzer) "
                "VALUES (?, ?, ?, ?, ?)",
                (1, "c", "id", "ann", "a"),
            )
            raise RuntimeError("fails after the first statement")

        with pytest.raises(RuntimeError):
            backend.write(half)
        assert backend.read(lambda tx: tx.one("SELECT COUNT(*) FROM index_users")) == (0,)
    finally:
        backend.close()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from affect_memory.memory.index.storage.opening import IndexTarget, open_backend
    kind, where, schema = sys.argv[1:4]
    target = (IndexTarget("file", path=Path(where)) if kind == "file"
              else IndexTarget("postgresql", url=where, schema=schema))
    backend = open_backend(target, lock_timeout=5.0)
    with backend.lock("memories.ann.x", timeout=5.0):
        print("locked", flush=True)
        time.sleep(600)
    """
)


def test_a_user_lock_excludes_others_and_dies_with_its_process(target: IndexTarget) -> None:
    where = str(target.path) if target.kind == "file" else str(target.url)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, target.kind, where, str(target.schema)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    backend = opened(target)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with backend.try_lock("memories.ann.x") as got:
            assert not got
        with backend.try_lock("memories.bob.y") as got:
            assert got  # another user's lock is free
        busy = r"stayed locked by another writer for 0\.3 s"
        with pytest.raises(StoreError, match=busy), backend.lock("memories.ann.x", timeout=0.3):
            pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        with backend.lock("memories.ann.x", timeout=10.0):  # free once its holder died
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
        backend.close()
