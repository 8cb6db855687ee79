"""``affect-memory list``, ``export`` and ``erase`` on a real embedded store: a page as a table
or JSON, an export that ingest reads back whole, an erase that needs --yes, and bad input as one
line naming the field and value, exit 2, with nothing written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from affect_memory.state.location import STATE_ENV, open_state_store
from tests.plugin.memory.data_rights_fixtures import IDS, USER_A, USER_B, seed, snapshot
from tests.plugin.state.user_data import held, mentions, seed_conversations

LIMIT_RULE = "--limit must be an integer in [1, 1000]"
OFFSET_RULE = "--offset must be an integer of at least 0"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def data(tmp_path: Path, embedder: Embedder) -> Path:
    """A data dir whose store holds both users' memories with recall counts."""
    with ChromaMemory(tmp_path / "data" / "chroma", embedder=embedder) as memory:
        seed(memory)
    return tmp_path / "data"


def test_list_prints_a_table_by_default_and_records_with_json(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "list", "--user-id", USER_A, "--limit", "2", "--data-dir", str(data)
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == [
        "timestamp",
        "(UTC)",
        "id",
        "recalls",
        "significance",
        "text",
    ]
    assert out.splitlines()[-1] == f"1-2 of {len(IDS)} memories of {USER_A!r}"
    code, out, _ = run(
        capsys, "list", "--user-id", USER_A, "--offset", "1", "--json", "--data-dir", str(data)
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == len(IDS) - 1
    assert all(line["user_id"] == USER_A for line in lines)


def test_export_then_ingest_into_an_empty_store_round_trips(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], embedder: Embedder
) -> None:
    out = tmp_path / "ann.jsonl"
    code, stdout, err = run(
        capsys, "export", "--user-id", USER_A, "--out", str(out), "--data-dir", str(data)
    )
    assert code == 0 and stdout == "" and f"exported {len(IDS)} memories" in err
    code, stdout, _ = run(capsys, "export", "--user-id", USER_A, "--data-dir", str(data))
    assert stdout == out.read_text(encoding="utf-8")  # stdout by default, the same lines
    fresh = tmp_path / "fresh"
    assert main(["ingest", str(out), "--data-dir", str(fresh), "--no-progress"]) == 0
    with ChromaMemory(data / "chroma", embedder=embedder) as memory:
        before = snapshot(memory, USER_A)
    with ChromaMemory(fresh / "chroma", embedder=embedder) as memory:
        assert snapshot(memory, USER_A) == before
        assert memory.stats().users == {USER_A: len(IDS)}


def test_erase_without_yes_exits_2_saying_nothing_was_erased(
    data: Path, capsys: pytest.CaptureFixture[str], embedder: Embedder
) -> None:
    code, out, err = run(capsys, "erase", "--user-id", USER_A, "--data-dir", str(data))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "nothing was erased" in err and "--yes" in err
    code, out, err = run(
        capsys, "erase", "--user-id", USER_A, "--yes", "--json", "--data-dir", str(data)
    )
    assert code == 0 and json.loads(out) == {"user_id": USER_A, "memories": len(IDS), "state": None}
    assert not (data / "state.db").exists()  # no state store was made to find nothing in it
    with ChromaMemory(data / "chroma", embedder=embedder) as memory:
        assert memory.count(USER_A) == 0 and memory.count(USER_B) == len(IDS)


@pytest.mark.parametrize("named_by", ["the default file", "the environment"])
def test_erase_erases_the_conversations_of_the_default_state_store(
    named_by: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --state, erase finds the store every other command uses by default."""
    path = data / "state.db" if named_by == "the default file" else tmp_path / "elsewhere.db"
    if named_by == "the environment":
        monkeypatch.setenv(STATE_ENV, str(path))
    store = open_state_store(str(path))
    try:
        asyncio.run(seed_conversations(store))
    finally:
        store.close()
    code, out, _ = run(
        capsys, "erase", "--user-id", USER_A, "--yes", "--json", "--data-dir", str(data)
    )
    assert code == 0 and json.loads(out)["state"]["conversations"] == ["ann-1", "ann-2", "team"]
    after = held("sqlite", str(path))
    assert mentions(after, USER_A) == [] and mentions(after, USER_B) != []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["list", "--user-id", USER_A, "--limit", "0"], f"{LIMIT_RULE}, got 0"),
        (["list", "--user-id", USER_A, "--limit", "ten"], f"{LIMIT_RULE}, got 'ten'"),
        (["list", "--user-id", USER_A, "--limit", "1001"], "--limit"),
        (["list", "--user-id", USER_A, "--offset", "-3"], f"{OFFSET_RULE}, got -3"),
        (["list", "--user-id", ""], "user_id"),
        (["export", "--user-id", "a\x00b"], "user_id"),
        (["export", "--user-id", USER_A, "--out", "/nonexistent-dir/x.jsonl"], "--out"),
        (["erase", "--user-id", "", "--yes"], "user_id"),
        (["erase", "--user-id", USER_A, "--yes", "--state", "ftp://nowhere"], "--state"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_field_and_value_exit_2_and_nothing_written(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], embedder: Embedder,
    argv: list[str], named: str,
) -> None:  # fmt: skip
    fresh = tmp_path / "untouched"
    code, out, err = run(capsys, *argv, "--data-dir", str(data))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and named in err and "Traceback" not in err
    code, _, err = run(capsys, *argv, "--data-dir", str(fresh))
    assert code == 2 and not fresh.exists()  # refused before anything was created
    with ChromaMemory(data / "chroma", embedder=embedder) as memory:
        assert memory.count(USER_A) == len(IDS) and memory.count(USER_B) == len(IDS)
