"""``bench fleet --quick``: four real worker processes over one PostgreSQL schema, one ``chroma
run`` server the bench starts and the memory index, 200 turns with retrieval and the memory
turn effects on, four workers SIGKILLed mid-run and restarted; every check holds, a killed
worker's conversation completes its next turn, and the bench leaves no server or schema
behind. The full-size run (8 workers, 2,000 turns) is ``affect-memory bench fleet``."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from affect_memory.cli import main
from affect_memory.models.embeddings import Embedder
from affect_memory.state.location import STATE_ENV
from tests.plugin.state.postgres_fixture import (
    require_psycopg,
    run_sql,
    server_url,
    temporary_schema,
)


def _schema_exists(url: str, schema: str) -> bool:
    return bool(run_sql(url, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)))


def test_a_quick_fleet_passes_every_check_through_sigkills(
    capsys: pytest.CaptureFixture[str],
) -> None:
    require_psycopg()
    url = server_url()
    with temporary_schema(url) as schema:
        code = main(["bench", "fleet", "--quick", "--json", "--state", f"{url}?schema={schema}"])
        report = json.loads(capsys.readouterr().out)
        assert not _schema_exists(url, schema), "the bench drops the schema it created"
    assert code == 0, [check for check in report["checks"] if not check["ok"]]
    assert [check["name"] for check in report["checks"] if not check["ok"]] == []
    assert {check["name"] for check in report["checks"]} == {
        "transcripts pair user and assistant",
        "final states equal a serial replay",
        "every committed turn's outbox item applied exactly once",
        "recall counts equal the turns that surfaced each memory",
        "no cross-user result",
        "a killed worker's conversation completes its next turn",
    }
    assert report["options"]["workers"] == 4 and report["turns"] >= 200
    assert report["failed_turns"] == 0 and report["restarts"] == 4
    outbox = next(c for c in report["checks"] if c["name"].startswith("every committed"))
    assert outbox["numbers"]["committed_turns"] >= 200
    assert outbox["numbers"]["pending"] == 0 and outbox["numbers"]["missing"] == 0

    kills = report["kills"]
    assert [kill["phase"] for kill in kills] == ["holding", "committed"] * 2
    # Killed while holding its conversation: nothing of that turn was committed, and the
    # conversation's next turn got the lock once the dead worker's connection dropped, well
    # inside the 30 s lock timeout.
    holding = [kill for kill in kills if kill["phase"] == "holding"]
    assert any(not kill["turn_committed"] for kill in holding)
    assert all(kill["next_turn_completed"] for kill in kills)
    assert all(kill["next_turn_lock_wait_ms"] < 10_000 for kill in holding)
    # Killed after its commit, while applying the turn's memory writes: the turn stands, and
    # its outbox item was finished by another worker (the exactly-once check above).
    assert any(kill["turn_committed"] for kill in kills if kill["phase"] == "committed")

    assert report["stores"]["state"] == "postgresql"
    for part in ("state", "chroma_read", "chroma_write", "index", "embedding", "engine"):
        assert report["parts_ms"][part]["median"] >= 0
    assert 0.99 <= sum(report["parts_share"].values()) <= 1.01
    servers = report["servers"]
    assert servers["state"] == schema
    if servers["index"] is not None:
        assert not _schema_exists(url, servers["index"])
    with pytest.raises(ProcessLookupError):
        os.kill(servers["chroma_pid"], 0)
    address = urlsplit(servers["chroma_url"])
    with pytest.raises(OSError), socket.create_connection((address.hostname, address.port), 1):
        pass


def test_without_a_server_it_says_what_to_pass(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STATE_ENV, raising=False)
    assert main(["bench", "fleet", "--quick"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        "affect-memory bench: bench fleet needs a PostgreSQL server: pass --state "
        "postgresql://USER@HOST:PORT/DB or set $AFFECT_MEMORY_STATE"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--users", "30"], "--users (30) cannot exceed --conversations (20)"),
        (["--workers", "0"], "--workers must be >= 1, got 0"),
        (["--kills", "60"], "--kills must be between 0 and a quarter of --turns, got 60"),
        (["--state", "sqlite:///tmp/state.db"], "--state must name a PostgreSQL server"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state = [] if "--state" in argv else ["--state", "postgresql://127.0.0.1:1/test"]
    assert main(["bench", "fleet", "--quick", *state, *argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert expected in line


def test_a_non_empty_index_is_refused_before_anything_is_written(
    tmp_path: Path,
    embedder: Embedder,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from affect_memory.memory.index.storage.opening import INDEX_ENV, INDEX_FILE
    from affect_memory.memory.store import ChromaMemory

    require_psycopg()
    url = server_url()
    note = {"id": "m1", "text": "I keep bees.", "user_id": "ann",
            "timestamp": "2026-05-01T10:00:00+00:00"}  # fmt: skip
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([note], progress=False)
    sqlite_index = str(tmp_path / "chroma" / INDEX_FILE)
    with temporary_schema(url) as schema, temporary_schema(url) as state:
        pg_index = f"{url}?schema={schema}"
        with ChromaMemory(tmp_path / "chroma2", embedder=embedder, index=pg_index) as memory:
            memory.add([note], progress=False)
        for index, source in ((sqlite_index, "--index"), (pg_index, f"${INDEX_ENV}")):
            argv = ["bench", "fleet", "--quick", "--state", f"{url}?schema={state}"]
            if source == "--index":
                argv += ["--index", index]
            else:
                monkeypatch.setenv(INDEX_ENV, index)
            assert main(argv) == 2
            [line] = capsys.readouterr().err.splitlines()
            assert f"{source}: the memory index" in line and "already indexes 1 user;" in line
            assert not _schema_exists(url, state)
        assert run_sql(url, f'SELECT count(*) FROM "{schema}".index_users') == [(1,)]


async def test_a_starting_worker_waits_for_an_unreachable_server() -> None:
    from affect_memory.bench.fleet_worker import _when_up
    from affect_memory.errors import StoreUnavailableError

    tries: list[int] = []

    def open_store() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise StoreUnavailableError("cannot open the store: Connection refused")
        return "open"

    assert await _when_up(open_store, patience=30.0) == "open"
    assert len(tries) == 3


async def test_a_starting_worker_gives_up_after_its_patience() -> None:
    from affect_memory.bench.fleet_worker import _when_up
    from affect_memory.errors import StoreUnavailableError

    def never() -> str:
        raise StoreUnavailableError("cannot open the store: Connection refused")

    with pytest.raises(StoreUnavailableError):
        await _when_up(never, patience=0.0)
