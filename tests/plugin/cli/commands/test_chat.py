"""``affect-memory chat``: the missing-endpoint message, and real turns against a loopback model.

The round trip spawns the real command, which loads the real model, opens embedded Chroma and
SQLite in a temporary directory and streams from a loopback chat-completions server (the one
the adapter tests use) that records every request.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.cli.commands.chat import MODEL_ENV, MODEL_URL_ENV
from affect_memory.kernel.protocols import Message, OutboxItem
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.turns.effects import MEMORY_TOPIC
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from affect_memory.state.sqlite import SQLiteStateStore
from tests.plugin.models.test_openai_adapter import (
    API_KEY,
    ChatServer,
    Reply,
    free_port,
    json_reply,
    stream_of,
)

ROOT = Path(__file__).resolve().parents[4]
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def test_without_an_endpoint_it_says_what_to_configure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv(MODEL_URL_ENV, raising=False)
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert main(["chat", "--data-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("affect-memory chat: no model endpoint")
    assert "--model-url http://127.0.0.1:11434/v1 --model llama3.1" in line
    assert "vLLM" in line and "llama.cpp" in line and MODEL_URL_ENV in line
    assert not (tmp_path / "state.db").exists(), "nothing is opened before the check"


def test_a_url_without_a_model_name_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv(MODEL_URL_ENV, "http://127.0.0.1:9/v1")
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert main(["chat", "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "no model name for http://127.0.0.1:9/v1: pass --model NAME" in line


def test_an_api_key_variable_that_is_not_set_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    variable = "AFFECT_MEMORY_TEST_KEY"
    monkeypatch.delenv(variable, raising=False)
    argv = ["chat", "--model-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*argv, "--api-key-env", variable, "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"affect-memory chat: --api-key-env names {variable}, which is not set"


def test_a_key_no_header_can_carry_is_one_line_that_names_its_variable_not_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    variable = "AFFECT_MEMORY_TEST_KEY"
    monkeypatch.setenv(variable, f"{API_KEY}\u00e9")
    argv = ["chat", "--model-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*argv, "--api-key-env", variable, "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"affect-memory chat: the API key in ${variable}: api_key has a non-")
    assert API_KEY not in line
    assert not (tmp_path / "state.db").exists(), "nothing is opened before the check"


def _spawn_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in PROXIES}
    env.update(HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False", NO_PROXY="127.0.0.1")
    return env


async def test_a_run_in_which_every_turn_failed_exits_1_with_one_summary_line(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "affect_memory.cli",
        "chat",
        "--model-url",
        url,
        "--model",
        "test-model",
        "--model-timeout",
        "2",
        "--data-dir",
        str(tmp_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=_spawn_env(),
    )
    stdout, stderr = await asyncio.wait_for(
        process.communicate(b"Hello there\nAre you there?\n"), timeout=240
    )
    err = stderr.decode().splitlines()
    assert process.returncode == 1, err
    assert stdout.decode() == ""
    failures = [line for line in err if line.endswith("(turn not committed)")]
    assert len(failures) == 2 and all(f"cannot connect to {url}" in line for line in failures)
    assert err[-1] == (
        f"affect-memory chat: all 2 turn(s) failed and none was committed to "
        f"{tmp_path / 'state.db'}; check --model-url {url} and --model test-model"
    )
    assert not any("Traceback" in line for line in err)


def _messages(db: Path, conversation_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT role, content FROM messages WHERE conversation_id = ? ORDER BY seq",
            (conversation_id,),
        ).fetchall()


async def test_a_conversation_streams_replies_and_commits_each_turn(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    server = ChatServer()
    await server.start()
    server.script(
        Reply(pieces=stream_of("Hello", " Alice,", " nice to meet you.")),
        json_reply({"error": {"message": "the model is overloaded"}}, status="503 Unavailable"),
        Reply(pieces=stream_of("Your cat", " is called Miso.")),
    )
    # A memory write an earlier run committed but never applied (say Chroma was down).
    earlier = MemoryRecord(
        id="turn-earlier-msg",
        text="I work night shifts as a nurse in Porto",
        user_id="alice",
        timestamp="2026-05-01T10:00:00Z",
    )
    payload = {
        "turn_id": "turn-earlier",
        "recalled_ids": [],
        "recalled_at": None,
        "new_record": earlier.model_dump(mode="json"),
    }
    store = SQLiteStateStore(tmp_path / "state.db")
    async with store.transaction("earlier") as transaction:
        await transaction.commit(
            state=None,
            messages=(Message(role="user", content=earlier.text),),
            outbox=[OutboxItem(id="turn-earlier-out", topic=MEMORY_TOPIC, payload=payload)],
        )
    store.close()
    env = _spawn_env()
    lines = [
        "Hi, I'm Alice and I just adopted a grey cat called Miso.",
        "Can you hear me?",
        "What is my cat called?",
    ]
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "affect_memory.cli",
            "chat",
            "--model-url",
            server.base_url,
            "--model",
            "test-model",
            "--user-id",
            "alice",
            "--data-dir",
            str(tmp_path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        stdout, stderr = await asyncio.wait_for(
            process.communicate(("\n".join(lines) + "\n").encode()), timeout=240
        )
    finally:
        await server.stop()
    out, err = stdout.decode(), stderr.decode()
    assert process.returncode == 0, err
    assert out.splitlines() == ["Hello Alice, nice to meet you.", "Your cat is called Miso."]
    failures = [line for line in err.splitlines() if "not committed" in line]
    assert len(failures) == 1 and "503" in failures[0] and "overloaded" in failures[0]
    assert "Traceback" not in err
    assert f"2 turn(s) committed to {tmp_path / 'state.db'}; 1 failed" in err
    assert "replayed 1 pending memory write(s)" in err

    assert _messages(tmp_path / "state.db", "alice-chat") == [
        ("user", lines[0]),
        ("assistant", "Hello Alice, nice to meet you."),
        ("user", lines[2]),
        ("assistant", "Your cat is called Miso."),
    ], "the failed turn left the transcript unchanged"

    assert len(server.requests) == 3
    first, _, last = (request.body for request in server.requests)
    assert first["model"] == "test-model" and first["stream"] is True
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][-1]["content"] == lines[0]
    assert lines[0] not in first["messages"][0]["content"]
    # The last turn sees the committed first turn as history, and its recalled memory (the
    # one the replayed outbox wrote) as a separate, untrusted data message. The first message
    # also became a memory, but it is still in the history window, so it is not recalled again.
    roles = [m["role"] for m in last["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and roles[-1] == "user"
    assert last["messages"][-1]["content"] == lines[2]
    evidence = last["messages"][-2]["content"]
    assert "<untrusted_data>" in evidence and "night shifts as a nurse" in evidence
    assert "grey cat called Miso" not in evidence
    assert "nurse" not in last["messages"][0]["content"], "evidence never enters the system prompt"
    assert 0 < last["max_tokens"] <= 1024

    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        texts = {hit.text for hit in memory.recall("cat", "alice", top_k=10).results}
    assert texts == {lines[0], earlier.text}, (
        "each committed statement became a memory (the question did not), and the pending "
        "write was replayed"
    )
    reopened = SQLiteStateStore(tmp_path / "state.db")
    try:
        assert await reopened.pending_outbox(MEMORY_TOPIC) == ()
    finally:
        reopened.close()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model-timeout", "0"], "--model-timeout must be a finite number of seconds > 0, got 0"),
        (["--model-url", "ftp://host/v1"], "--model-url must be an http:// or https:// URL"),
        (["--timeout", "0"], "--timeout must be a number of seconds in (0, 3600], got 0"),
        (["--collection", "bad/name"], "--collection must be characters from"),
        (["--conversation-id", "x" * 300], "--conversation-id must be a non-empty string"),
        (["--index", "ftp://x"], "--index: index must be postgresql://"),
    ],
)
def test_bad_arguments_name_their_flag_and_create_no_data_directory(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    url = [] if "--model-url" in argv else ["--model-url", "http://127.0.0.1:9/v1"]
    assert main(["chat", *url, "--model", "m", "--data-dir", str(data_dir), *argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("affect-memory chat: ") and expected in line, line
    assert not data_dir.exists(), "nothing is created before the arguments are checked"
