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
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, Tool

from kernel.affect import decoding_params, mood_octant
from kernel.engine import DEFAULT_APPRAISAL_POLICY
from kernel.models import AffectState
from kernel.surfacing import build_presence_vector
from plugin.mcp_server import TOOL_NAMES, memory_id
from tests.contracts.recall_schema import RECALL_RESULT_KEYS

ROOT = Path(__file__).resolve().parents[2]
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
        args=["-m", "plugin.cli", "mcp", "--data-dir", str(data_dir)],
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
        "recall": ({"query", "user_id"}, {"query", "user_id", "top_k", "mood_valence"}),
        "forget": ({"ids"}, {"ids", "user_id"}),
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
    assert top["similarity"] == pytest.approx(1 - top["distance"] / 2)
    assert top["recency"] < 1.0, "a memory from May has decayed by December"
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


def test_forget_removes_only_what_exists(client: McpClient) -> None:
    stored = client.ok(
        "remember",
        {
            "text": "I am learning the cello",
            "user_id": "carol",
            "timestamp": "2026-01-01T00:00:00Z",
        },
    )
    assert client.ok("forget", {"ids": [stored["id"]], "user_id": "dave"}) == {"removed": []}
    assert client.ok("forget", {"ids": [stored["id"], "mem-nope"]}) == {"removed": [stored["id"]]}
    assert client.ok("forget", {"ids": [stored["id"]]}) == {"removed": []}
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
        ("forget", {"ids": "mem-1"}, "ids"),
        ("forget", {"ids": [""]}, "ids[0] must be a non-empty string"),
        (
            "appraise",
            {"conversation_id": "c-bad", "message": "hi", "intent": "GLEE"},
            "intent 'GLEE' is not one of",
        ),
        ("appraise", {"conversation_id": "c-bad", "message": ""}, "message must be a non-empty"),
        ("appraise", {"conversation_id": "", "message": "hi"}, "conversation_id"),
        ("presence", {}, "conversation_id is required"),
        ("nonexistent", {}, "nonexistent"),
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
