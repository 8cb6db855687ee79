"""The MCP memory server end to end: the SDK's stdio client spawning ``affect-memory mcp``.

One server process serves the whole module (loading the model dominates its start-up). The
client runs on its own event loop in a background thread, so the tests are plain functions
and the SDK's cancel scopes stay inside the one task that opened them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, Tool

from affect_memory.integrations.mcp_server import TOOL_NAMES
from affect_memory.integrations.mcp_tools import memory_id
from affect_memory.kernel.affect import decoding_params, mood_octant
from affect_memory.kernel.engine import DEFAULT_APPRAISAL_POLICY
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.surfacing import build_presence_vector
from tests.contracts.recall_schema import RECALL_RESULT_KEYS, state_similarity_of
from tests.plugin.integrations.mcp_process import McpProcess

ROOT = Path(__file__).resolve().parents[3]
BREAKDOWN = RECALL_RESULT_KEYS
START_TIMEOUT = 240.0
"""Seconds the server may take to start: loading the model is slow on a busy machine."""


class McpClient:
    """A client session on a background loop; ``call`` and ``tools`` block until answered."""

    def __init__(self, params: StdioServerParameters, errlog: Any) -> None:
        self._params = params
        self._errlog = errlog
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="mcp-client", daemon=True)

    def start(self) -> None:
        """Spawn the server and wait until the session is initialized."""
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise TimeoutError(f"the MCP server did not start within {START_TIMEOUT:.0f} s")
        if self._failure is not None:
            raise RuntimeError("the MCP client failed to start") from self._failure

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as error:  # reported to start() or seen as a dead session
            self._failure = error
        finally:
            self._ready.set()
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with (
            stdio_client(self._params, errlog=self._errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            self._session = session
            self._ready.set()
            await self._stop.wait()

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=120)

    @property
    def session(self) -> ClientSession:
        """The live session."""
        assert self._session is not None, "the session is not open"
        return self._session

    def tools(self) -> list[Tool]:
        """The server's tool listing."""
        return list(self._run(self.session.list_tools()).tools)

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one tool and return its raw result."""
        result: CallToolResult = self._run(self.session.call_tool(name, arguments))
        return result

    def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool that must succeed; its structured result, checked against its text."""
        result = self.call(name, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        text = result.content[0]
        assert text.type == "text"
        assert json.loads(text.text) == result.structured_content
        return dict(result.structured_content)

    def error(self, name: str, arguments: dict[str, Any]) -> str:
        """Call a tool that must fail; its one-line error text."""
        result = self.call(name, arguments)
        assert result.is_error, result.structured_content
        assert result.structured_content is None
        [content] = result.content
        assert content.type == "text"
        assert "\n" not in content.text, content.text
        return content.text

    def close(self) -> None:
        """Close the session, which ends the server (stdin closes)."""
        if self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's DATA_DIR."""
    return tmp_path_factory.mktemp("mcp-data")


@pytest.fixture(scope="module")
def client(data_dir: Path) -> Iterator[McpClient]:
    """One ``affect-memory mcp`` process for the module, spawned by the SDK's stdio client."""
    env = {
        key: os.environ[key]
        for key in ("PYTHONPATH", "HF_HOME", "TMPDIR", "VIRTUAL_ENV")
        if key in os.environ
    }
    env.update(HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "affect_memory.cli", "mcp", "--data-dir", str(data_dir)],
        env=env,
        cwd=str(ROOT),
    )
    with (data_dir / "server-stderr.log").open("w") as errlog:
        mcp = McpClient(params, errlog)
        mcp.start()
        try:
            yield mcp
        finally:
            mcp.close()


def _transcript(data_dir: Path, conversation_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(data_dir / "state.db") as db:
        return db.execute(
            "SELECT role, content FROM messages WHERE conversation_id = ? ORDER BY seq",
            (conversation_id,),
        ).fetchall()


def test_the_five_tools_are_listed_with_their_input_schemas(client: McpClient) -> None:
    tools = {tool.name: tool for tool in client.tools()}
    assert tuple(tools) == TOOL_NAMES
    expected = {
        "remember": (
            {"text", "user_id"},
            {"text", "user_id", "timestamp", "significance", "emotional_valence", "episode"},
        ),
        "recall": ({"query", "user_id"}, {"query", "user_id", "top_k", "mood_valence", "where"}),
        "forget": ({"ids", "user_id"}, {"ids", "user_id"}),
        "appraise": ({"conversation_id", "message"}, {"conversation_id", "message", "intent"}),
        "presence": ({"conversation_id"}, {"conversation_id"}),
    }
    for name, (required, properties) in expected.items():
        schema = tools[name].input_schema
        assert schema["type"] == "object"
        assert set(schema["required"]) == required, name
        assert set(schema["properties"]) == properties, name
        assert tools[name].description
    assert tools["forget"].input_schema["properties"]["ids"]["type"] == "array"
    assert tools["recall"].input_schema["properties"]["top_k"]["type"] == "integer"


def test_remember_then_recall_with_the_score_breakdown_scoped_to_the_user(
    client: McpClient,
) -> None:
    stamp = "2026-05-01T09:30:00+02:00"
    text = "I adopted a grey cat called Miso from the shelter"
    stored = client.ok(
        "remember",
        {
            "text": text,
            "user_id": "alice",
            "timestamp": stamp,
            "significance": 0.9,
            "emotional_valence": 0.6,
        },
    )
    assert stored["id"] == memory_id("alice", text, "2026-05-01T07:30:00.000000+00:00")
    assert stored["created"] is True
    other = client.ok(
        "remember", {"text": "My commute to the office is forty minutes", "user_id": "alice"}
    )
    assert other["id"] != stored["id"]
    written = datetime.fromisoformat(other["timestamp"])
    assert abs(datetime.now(UTC) - written) < timedelta(minutes=5), "timestamp defaults to now"

    again = client.ok("remember", {"text": text, "user_id": "alice", "timestamp": stamp})
    assert again == {**stored, "created": False}, "a retried call must store nothing twice"

    found = client.ok("recall", {"query": "what is my cat called?", "user_id": "alice"})
    assert found["user_id"] == "alice"
    assert {hit["id"] for hit in found["results"]} == {stored["id"], other["id"]}
    top = max(found["results"], key=lambda hit: hit["similarity"])
    assert all(tuple(hit) == BREAKDOWN for hit in found["results"])
    assert top["id"] == stored["id"]
    assert top["text"] == text
    assert top["significance"] == 0.9
    assert top["emotional_valence"] == 0.6
    assert top["timestamp"] == "2026-05-01T07:30:00.000000+00:00"
    assert 0.0 < top["similarity"] <= 1.0
    # A question about the user's present: the similarity is the weighted cosine, words
    # matched and topic agreement, times the change gain as the memory reports one
    # ("adopted"), each part and weight in the hit, and the memory ages from the user's
    # newest memory (the commute, written now).
    assert top["relevance"]["cosine"] == pytest.approx(1 - top["distance"])
    assert 0.0 <= top["relevance"]["topic"] <= 1.0
    assert top["relevance"]["change"] == "adopted" and top["plan"] == "state"
    assert top["similarity"] == pytest.approx(state_similarity_of(top["relevance"]))
    assert "reports a change: 'adopted'" in top["time_rule"]
    assert top["time_rule"].startswith("current-state query")
    assert top["recency"] < 1.0, "a memory from May is older than the user's newest"
    scores = [hit["score"] for hit in found["results"]]
    assert scores == sorted(scores, reverse=True), "results come in rank order"

    for_bob = client.ok("recall", {"query": "what is my cat called?", "user_id": "bob"})
    assert for_bob["results"] == [], "another user's recall must not see alice's memories"

    one = client.ok("recall", {"query": "cat", "user_id": "alice", "top_k": 1})
    assert [hit["id"] for hit in one["results"]] == [found["results"][0]["id"]]


def test_appraise_commits_and_presence_reflects_it(client: McpClient, data_dir: Path) -> None:
    fresh = build_presence_vector(AffectState())
    assert client.ok("presence", {"conversation_id": "c-appraise"}) == fresh

    hurt = client.ok(
        "appraise",
        {"conversation_id": "c-appraise", "message": "You are useless and I can't stand you."},
    )
    assert hurt["intent"] == "ABUSE"
    assert hurt["gate"]["source"] == "embedding-gate"
    assert 0.0 < hurt["gate"]["confidence"] <= 1.0
    mood = hurt["mood"]
    expected = DEFAULT_APPRAISAL_POLICY.appraise(
        AffectState(), "ABUSE", "You are useless and I can't stand you."
    )
    assert mood == expected.state.mood.model_dump(), "the reference appraisal of a fresh state"
    assert mood["valence"] < 0
    assert hurt["octant"] == mood_octant(expected.state.mood)
    assert hurt["emotions"] == {k: v for k, v in expected.active_emotions.items() if v > 0}
    assert set(hurt) >= {"intent", "mood", "octant", "emotions", "controls"}
    assert hurt["emotions"] and all(value > 0 for value in hurt["emotions"].values())
    controls = hurt["controls"]
    assert set(controls) == {"temperature", "top_p", "length_factor", "base_tokens", "max_tokens"}
    assert controls["base_tokens"] == 1024
    assert controls["max_tokens"] == max(180, round(1024 * controls["length_factor"]))
    decoding = decoding_params(expected.state.mood)
    assert (controls["temperature"], controls["top_p"]) == (decoding.temperature, decoding.top_p)

    after = client.ok("presence", {"conversation_id": "c-appraise"})
    assert after["affect"] == {key: round(value, 4) for key, value in mood.items()}
    assert after != fresh

    given = client.ok(
        "appraise",
        {
            "conversation_id": "c-appraise",
            "message": "Sorry, that was unfair.",
            "intent": " apology",
        },
    )
    assert given["intent"] == "APOLOGY"
    assert given["gate"]["source"] == "caller"
    assert given["mood"]["valence"] > mood["valence"]
    then = DEFAULT_APPRAISAL_POLICY.appraise(expected.state, "APOLOGY", "Sorry, that was unfair.")
    assert given["mood"] == then.state.mood.model_dump(), "appraised on the committed state"
    assert _transcript(data_dir, "c-appraise") == [
        ("user", "You are useless and I can't stand you."),
        ("user", "Sorry, that was unfair."),
    ], "appraise commits the user message and no assistant message"
    assert client.ok("presence", {"conversation_id": "other"}) == fresh


def test_forget_removes_only_what_exists_and_only_for_the_user_named(client: McpClient) -> None:
    stored = client.ok(
        "remember",
        {
            "text": "I am learning the cello",
            "user_id": "carol",
            "timestamp": "2026-01-01T00:00:00Z",
        },
    )
    assert client.error("forget", {"ids": [stored["id"]]}) == "forget: user_id is required"
    assert client.ok("forget", {"ids": [stored["id"]], "user_id": "dave"}) == {"removed": []}
    gone = client.ok("forget", {"ids": [stored["id"], "mem-nope"], "user_id": "carol"})
    assert gone == {"removed": [stored["id"]]}
    assert client.ok("forget", {"ids": [stored["id"]], "user_id": "carol"}) == {"removed": []}
    assert client.ok("recall", {"query": "cello", "user_id": "carol"})["results"] == []


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("remember", {"text": "hello"}, "user_id is required"),
        ("remember", {"text": "hello", "user_id": ""}, "user_id must be a non-empty string"),
        ("remember", {"text": "  ", "user_id": "alice"}, "text must be a non-empty string"),
        (
            "remember",
            {"text": "hello", "user_id": "alice", "timestamp": "2026-05-01T09:30:00"},
            "timestamp must carry a UTC offset",
        ),
        (
            "remember",
            {"text": "hello", "user_id": "alice", "timestamp": "yesterday"},
            "timestamp is not an ISO-8601 timestamp, got 'yesterday'",
        ),
        (
            "remember",
            {"text": "hello", "user_id": "alice", "significance": 2},
            "remember: significance must be within [0, 1], got 2",
        ),
        (
            "remember",
            {"text": "hello", "user_id": "alice", "emotional_valence": -3},
            "emotional_valence must be within [-1, 1]",
        ),
        ("remember", {"text": "hello", "user_id": "alice", "significance": "high"}, "significance"),
        ("recall", {"query": "cat", "user_id": "alice", "top_k": 0}, "top_k"),
        (
            "recall",
            {"query": "cat", "user_id": "alice", "mood_valence": 5},
            "recall: mood_valence must be within [-1, 1], got 5",
        ),
        ("recall", {"query": "", "user_id": "alice"}, "query must be a non-empty string"),
        ("forget", {"ids": "mem-1", "user_id": "alice"}, "ids"),
        ("forget", {"ids": [""], "user_id": "alice"}, "ids[0] must be a non-empty string"),
        ("forget", {"ids": ["mem-1"]}, "forget: user_id is required"),
        (
            "appraise",
            {"conversation_id": "c-bad", "message": "hi", "intent": "GLEE"},
            "intent 'GLEE' is not one of",
        ),
        ("appraise", {"conversation_id": "c-bad", "message": ""}, "message must be a non-empty"),
        ("appraise", {"conversation_id": "", "message": "hi"}, "conversation_id"),
        ("presence", {}, "conversation_id is required"),
    ],
)
def test_bad_calls_are_one_line_tool_errors_and_write_nothing(
    client: McpClient,
    data_dir: Path,
    tool: str,
    arguments: dict[str, Any],
    expected: str,
) -> None:
    message = client.error(tool, arguments)
    assert expected in message
    assert "Traceback" not in message
    assert _transcript(data_dir, "c-bad") == []
    recalled = client.ok("recall", {"query": "hello", "user_id": "alice"})["results"]
    assert all(hit["text"] != "hello" for hit in recalled), "a refused remember wrote a memory"
    # The server still answers after the refusal.
    assert client.ok("presence", {"conversation_id": "c-bad"})["source"] == "affect_state"


def test_an_unknown_tool_is_a_json_rpc_error_and_the_server_keeps_serving(
    client: McpClient,
) -> None:
    # The MCP spec lists unknown tools among protocol errors (JSON-RPC -32602), not tool results.
    with pytest.raises(MCPError) as raised:
        client.call("nonexistent", {})
    assert raised.value.code == -32602
    assert "nonexistent" in raised.value.message
    assert "\n" not in raised.value.message
    assert client.ok("presence", {"conversation_id": "c-bad"})["source"] == "affect_state"


def _stored_texts(client: McpClient, user_id: str, query: str = "hello") -> set[str]:
    found = client.ok("recall", {"query": query, "user_id": user_id, "top_k": 64})["results"]
    return {hit["text"] for hit in found}


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "remember",
            {"text": "typo test", "user_id": "erin", "signifcance": 0.9},
            "remember: unknown argument 'signifcance'; did you mean 'significance'? "
            "(the arguments are text, user_id, timestamp, significance, emotional_valence, "
            "episode)",
        ),
        (
            "recall",
            {"query": "typo test", "user_id": "erin", "topk": 1},
            "recall: unknown argument 'topk'; did you mean 'top_k'?",
        ),
        ("forget", {"ids": ["mem-1"], "user_id": "erin", "all": True}, "unknown argument 'all'"),
        (
            "appraise",
            {"conversation_id": "c-strict", "message": "hi", "intnet": "CASUAL"},
            "appraise: unknown argument 'intnet'; did you mean 'intent'?",
        ),
        ("presence", {"conversation_id": "c-strict", "verbose": True}, "unknown argument"),
    ],
)
def test_unknown_or_misspelled_arguments_are_refused(
    client: McpClient, data_dir: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    message = client.error(tool, arguments)
    assert message.startswith(f"{tool}: ")
    assert expected in message
    assert "typo test" not in _stored_texts(client, "erin", "typo test")
    assert _transcript(data_dir, "c-strict") == []


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("remember", {"significance": True}, "remember: significance must be a number, got True"),
        ("remember", {"significance": "0.5"}, "remember: significance must be a number, got '0.5'"),
        ("remember", {"emotional_valence": False}, "emotional_valence must be a number, got False"),
        ("remember", {"episode": "yes"}, "remember: episode must be true or false, got 'yes'"),
        ("remember", {"episode": 1}, "episode must be true or false, got 1"),
        ("remember", {"text": 5}, "remember: text must be a string, got 5"),
        ("remember", {"user_id": ["alice"]}, "user_id must be a string, got ['alice']"),
        ("remember", {"timestamp": 1767225600}, "timestamp must be a string, got 1767225600"),
        ("recall", {"top_k": "6"}, "recall: top_k must be an integer, got '6'"),
        ("recall", {"top_k": 6.5}, "top_k must be an integer, got 6.5"),
        ("recall", {"top_k": True}, "top_k must be an integer, got True"),
        ("recall", {"top_k": 65}, "recall: top_k must be an integer from 1 to 64, got 65"),
        ("recall", {"mood_valence": "0.1"}, "mood_valence must be a number, got '0.1'"),
        ("forget", {"ids": [1]}, "forget: ids[0] must be a string, got 1"),
        ("forget", {"ids": "mem-1"}, "forget: ids must be a list of strings, got 'mem-1'"),
        ("appraise", {"intent": 3}, "appraise: intent must be a string, got 3"),
    ],
)
def test_types_are_not_coerced(
    client: McpClient, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    base: dict[str, dict[str, Any]] = {
        "remember": {"text": "coercion test", "user_id": "frank"},
        "recall": {"query": "coercion test", "user_id": "frank"},
        "forget": {"ids": ["mem-1"], "user_id": "frank"},
        "appraise": {"conversation_id": "c-coerce", "message": "hello"},
    }
    message = client.error(tool, {**base[tool], **arguments})
    assert message.startswith(f"{tool}: ")
    assert expected in message
    assert _stored_texts(client, "frank", "coercion test") == set()


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("remember", {"user_id": "alice\x00"}, "user_id must not contain control characters, got "),
        ("remember", {"user_id": "al\x1bice"}, "U+001B at position 3"),
        ("remember", {"timestamp": "2026-01-01T00:00:00Z\x00"}, "timestamp must not contain"),
        ("recall", {"user_id": "\x00"}, "recall: user_id must be a non-empty string with a"),
        ("forget", {"ids": ["mem-1\x00"]}, "forget: ids[0] must not contain control characters"),
        ("appraise", {"conversation_id": "c\x00nul"}, "conversation_id must not contain control"),
        ("presence", {"conversation_id": "c\x00nul"}, "presence: conversation_id must not"),
        (
            "remember",
            {"text": "\u200b"},
            "remember: text must be a non-empty string with a visible",
        ),
        (
            "remember",
            {"text": "\ufeff"},
            "text must be a non-empty string with a visible character",
        ),
        ("remember", {"user_id": "\u2060\u200d"}, "user_id must be a non-empty string with a"),
        ("recall", {"query": "\ufeff\u200b "}, "recall: query must be a non-empty string"),
        ("appraise", {"message": "\u200b"}, "appraise: message must be a non-empty string with"),
        ("appraise", {"conversation_id": "\ufeff"}, "conversation_id must be a non-empty string"),
    ],
)
def test_nul_in_ids_and_content_free_text_are_refused(
    client: McpClient, data_dir: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    base: dict[str, dict[str, Any]] = {
        "remember": {"text": "control test", "user_id": "gina"},
        "recall": {"query": "control test", "user_id": "gina"},
        "forget": {"ids": ["mem-1"], "user_id": "gina"},
        "appraise": {"conversation_id": "c-control", "message": "hello"},
        "presence": {"conversation_id": "c-control"},
    }
    message = client.error(tool, {**base[tool], **arguments})
    assert expected in message
    assert message.startswith(f"{tool}: ") and message.count(f"{tool}:") == 1
    assert _stored_texts(client, "gina", "control test") == set()
    assert _transcript(data_dir, "c-control") == []


def test_errors_name_the_tool_once_and_cut_long_values(client: McpClient) -> None:
    message = client.error("remember", {"text": "hello", "user_id": "alice", "significance": 2})
    assert message.startswith("remember: significance must be within [0, 1], got 2")
    assert message.count("remember") == 1
    huge = client.error(
        "remember", {"text": "hello", "user_id": "alice", "significance": "9" * 100_000}
    )
    assert huge.startswith("remember: significance must be a number, got '999")
    assert huge.endswith("(100000 characters)") or huge.endswith("(100,000 characters)")
    assert len(huge) < 400
    nul = client.error("recall", {"query": "hello", "user_id": "x" * 100_000 + "\x00"})
    assert len(nul) < 400
    assert "Error executing tool" not in message + huge + nul


# -- raw JSON-RPC over the server's stdin: what the SDK client cannot send ------------------------


class RawMcp(McpProcess):
    """``affect-memory mcp`` fed hand-written JSON-RPC lines; replies are read by id."""

    def __init__(self, data_dir: Path) -> None:
        """Start the server on ``data_dir``."""
        super().__init__(data_dir, errlog="raw-server-stderr.log")
        self._next_id = 0

    def request(self, method: str, params: dict[str, Any], timeout: float = 60.0) -> Any:
        """Send a well-formed request and return its reply."""
        self._next_id += 1
        payload = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        self.send(json.dumps(payload))
        return self.reply(self._next_id, timeout)

    def raw_call(self, arguments_json: str, name: str = "remember") -> dict[str, Any]:
        """A tools/call whose arguments object is written by hand; its result."""
        self._next_id += 1
        self.send(
            f'{{"jsonrpc": "2.0", "id": {self._next_id}, "method": "tools/call", '
            f'"params": {{"name": "{name}", "arguments": {arguments_json}}}}}'
        )
        reply = self.reply(self._next_id, 60.0)
        assert "result" in reply, reply
        return dict(reply["result"])

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A well-formed tools/call; its result."""
        reply = self.request("tools/call", {"name": name, "arguments": arguments})
        return dict(reply["result"])


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawMcp]:
    """A second server, on its own data directory, initialized by hand."""
    server = RawMcp(tmp_path_factory.mktemp("mcp-raw"))
    try:
        hello = server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
            timeout=START_TIMEOUT,
        )
        assert "result" in hello, hello
        server.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield server
    finally:
        server.close()


def _error_text(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    [content] = result["content"]
    assert "\n" not in content["text"]
    return str(content["text"])


def _raw_texts(raw: RawMcp, user_id: str) -> set[str]:
    result = raw.call("recall", {"query": "hello", "user_id": user_id, "top_k": 64})
    assert result.get("isError") is not True, result
    return {hit["text"] for hit in result["structuredContent"]["results"]}


@pytest.mark.parametrize(
    ("arguments_json", "expected"),
    [
        (
            '{"text": "hello dup", "user_id": "ivy", "user_id": "mallory"}',
            "remember: the request repeats the key 'user_id'; JSON keys must be unique",
        ),
        (
            '{"text": "hello dup", "text": "hello other", "user_id": "ivy"}',
            "remember: the request repeats the key 'text'",
        ),
        (
            '{"text": "hello dup", "user_id": "ivy", "significance": 0.1, "significance": 0.9}',
            "the request repeats the key 'significance'",
        ),
    ],
)
def test_duplicate_json_keys_are_refused_not_resolved_last_wins(
    raw: RawMcp, arguments_json: str, expected: str
) -> None:
    message = _error_text(raw.raw_call(arguments_json))
    assert message.startswith("remember: ") and expected in message
    assert _raw_texts(raw, "ivy") == set()
    assert _raw_texts(raw, "mallory") == set()


def test_a_duplicate_key_in_the_envelope_is_refused_too(raw: RawMcp) -> None:
    raw.send(
        '{"jsonrpc": "2.0", "id": 9001, "method": "tools/call", "params": {"name": "forget", '
        '"name": "remember", "arguments": {"text": "hello envelope", "user_id": "ivy"}}}'
    )
    reply = raw.reply(9001, 60.0)
    assert _error_text(reply["result"]) == (
        "remember: the request repeats the key 'name'; JSON keys must be unique"
    )
    assert _raw_texts(raw, "ivy") == set()


@pytest.mark.parametrize(
    ("name", "arguments_json", "expected"),
    [
        (
            "remember",
            '{"text": "hello \\ud800 there", "user_id": "judy"}',
            "remember: text has a lone surrogate, which is not Unicode text",
        ),
        (
            "remember",
            '{"text": "hello there", "user_id": "ju\\udfffdy"}',
            "remember: user_id has a lone surrogate",
        ),
        (
            "recall",
            '{"query": "\\udc00", "user_id": "judy"}',
            "recall: query has a lone surrogate",
        ),
        (
            "forget",
            '{"ids": ["mem-\\ud83d"], "user_id": "judy"}',
            "forget: ids[0] has a lone surrogate",
        ),
        (
            "remember",
            '{"text": "hello there", "user_id": "judy", "\\ud800": 1}',
            "remember: the request (a key) has a lone surrogate",
        ),
    ],
)
def test_a_lone_surrogate_gets_a_one_line_tool_error(
    raw: RawMcp, name: str, arguments_json: str, expected: str
) -> None:
    message = _error_text(raw.raw_call(arguments_json, name=name))
    assert message.startswith(f"{name}: ") and expected in message
    assert _raw_texts(raw, "judy") == set()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_refused(raw: RawMcp, number: str) -> None:
    remembered = raw.raw_call(
        f'{{"text": "hello nan", "user_id": "kim", "significance": {number}}}'
    )
    assert _error_text(remembered).startswith("remember: significance must be a finite number, got")
    recalled = raw.raw_call(
        f'{{"query": "hello", "user_id": "kim", "mood_valence": {number}}}', name="recall"
    )
    assert _error_text(recalled).startswith("recall: mood_valence must be a finite number, got")
    assert _raw_texts(raw, "kim") == set()


def test_a_well_formed_call_still_works_after_the_refusals(raw: RawMcp) -> None:
    stored = raw.call("remember", {"text": "hello, a proper memory", "user_id": "lee"})
    assert stored.get("isError") is not True, stored
    assert _raw_texts(raw, "lee") == {"hello, a proper memory"}
    a_pair = raw.call("remember", {"text": "hello \U0001f600 emoji", "user_id": "lee"})
    assert a_pair.get("isError") is not True, "a real surrogate pair (an emoji) is fine"


def test_recall_takes_a_where_filter_and_refuses_a_bad_one_in_one_line(
    client: McpClient,
) -> None:
    client.ok("remember", {"text": "I keep bees on the roof", "user_id": "wendy"})
    everything = client.ok("recall", {"query": "bees", "user_id": "wendy"})["results"]
    assert [hit["text"] for hit in everything] == ["I keep bees on the roof"]
    for_x = client.ok("recall", {"query": "bees", "user_id": "wendy", "where": {"agent_id": "x"}})
    assert for_x["results"] == [], "remember stores no agent: no memory meets the filter"
    message = client.error(
        "recall", {"query": "bees", "user_id": "wendy", "where": {"agent": "x"}}
    )
    assert message.startswith("recall: where: unknown field 'agent' = 'x'"), message
    message = client.error("recall", {"query": "bees", "user_id": "wendy", "where": "x"})
    assert "where must be an object" in message, message


def test_a_text_with_a_byte_that_is_not_utf8_is_refused_not_stored_as_a_replacement(
    raw: RawMcp,
) -> None:
    raw.send(
        b'{"jsonrpc": "2.0", "id": 9101, "method": "tools/call", "params": {"name": "remember", '
        b'"arguments": {"text": "hello caf\xe9", "user_id": "utf"}}}'
    )
    reply = raw.reply(9101, 60.0)
    assert "error" in reply and "not UTF-8" in reply["error"]["message"], reply
    assert "\n" not in reply["error"]["message"]
    assert _raw_texts(raw, "utf") == set()
