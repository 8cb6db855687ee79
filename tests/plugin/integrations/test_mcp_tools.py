"""The MCP tools in process: ``appraise`` is an AffectEngine turn, ``presence`` the engine's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from affect_memory import open_state_store
from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.integrations.mcp_tools import MemoryTools, ServerConfig, open_tools
from affect_memory.kernel import (
    AffectEngine,
    AffectState,
    GateResult,
    LimitExceededError,
    Message,
    build_presence_vector,
    mood_octant,
)
from affect_memory.kernel.adapters import ScriptedModel
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from affect_memory.state.sqlite import SQLiteStateStore
from tests.plugin.state.postgres_fixture import require_psycopg, server_url, temporary_schema

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

CONVERSATION = (
    ("I failed my driving test today.", " vulnerability"),
    ("You are useless and I can't stand you.", None),
    ("Sorry, that was unfair of me.", None),
    ("How do tides work?", "CURIOSITY"),
)
"""Messages with the caller's intent, or None to let the embedding gate decide."""


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SQLiteStateStore, SQLiteStateStore]]:
    """One store for the tools, one for a plain engine."""
    tools, engine = (
        SQLiteStateStore(tmp_path / "tools.db"),
        SQLiteStateStore(tmp_path / "engine.db"),
    )
    yield tools, engine
    tools.close()
    engine.close()


@pytest.fixture
def tools(
    embedder: SentenceTransformerEmbedder, stores: tuple[SQLiteStateStore, SQLiteStateStore]
) -> Iterator[MemoryTools]:
    """The tools over an in-process memory, the tools' store and the embedding gate."""
    memory = ChromaMemory(":memory:", collection=f"t{uuid.uuid4().hex}", embedder=embedder)
    yield MemoryTools(memory, stores[0], EmbeddingIntentGate(embedder), clock=lambda: NOW)
    memory.close()


async def committed(store: SQLiteStateStore, conversation: str) -> tuple[Any, tuple[Message, ...]]:
    async with store.transaction(conversation) as transaction:
        return await transaction.load_state(), await transaction.load_transcript()


async def test_appraise_equals_an_engine_turn_on_the_same_input(
    tools: MemoryTools,
    stores: tuple[SQLiteStateStore, SQLiteStateStore],
    embedder: SentenceTransformerEmbedder,
) -> None:
    gate = EmbeddingIntentGate(embedder)
    for message, intent in CONVERSATION:
        reported = await tools.appraise("c1", message, intent)
        decided = intent if intent is not None else gate.classify(message).intent
        model = ScriptedModel(gates=[GateResult(intent=decided)], replies=[[]])
        engine = AffectEngine(model=model, store=stores[1], conversation_id="c1", clock=lambda: NOW)
        turn = await engine.turn(message)
        assert reported["intent"] == turn.intent
        assert reported["mood"] == turn.mood.model_dump()
        assert reported["octant"] == mood_octant(turn.mood)
        assert reported["emotions"] == {k: v for k, v in turn.emotions.items() if v > 0}
        assert reported["gate"]["source"] == ("caller" if intent else "embedding-gate")
    state, transcript = await committed(stores[0], "c1")
    assert (state, transcript) == await committed(stores[1], "c1")
    assert [m.content for m in transcript] == [message for message, _ in CONVERSATION]
    assert {m.role for m in transcript} == {"user"}, "no model replies, so no assistant message"
    assert await tools.presence("c1") == build_presence_vector(state)


async def test_appraise_refuses_a_message_over_the_engines_limit_and_commits_nothing(
    tools: MemoryTools, stores: tuple[SQLiteStateStore, SQLiteStateStore]
) -> None:
    with pytest.raises(LimitExceededError, match=r"EngineLimits\.max_message_chars"):
        await tools.appraise("c2", "x" * 16_001, "CASUAL")
    assert await committed(stores[0], "c2") == (None, ())
    assert await tools.presence("c2") == build_presence_vector(AffectState())


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_the_server_keeps_conversation_state_where_its_state_url_says(
    kind: str, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ExitStack() as stack:
        if kind == "sqlite":
            state_url = f"sqlite:///{tmp_path}/elsewhere.db"
        else:
            require_psycopg()
            url = server_url()
            schema = stack.enter_context(temporary_schema(url))
            state_url = f"{url}?schema={schema}"
        config = ServerConfig(data_dir=tmp_path / "data", state_url=state_url)
        async with open_tools(config, embedder=embedder) as served:
            await served.appraise("c-url", "I failed my driving test today.", "VULNERABILITY")
        reopened = open_state_store(state_url)
        try:
            state, transcript = await committed(reopened, "c-url")  # type: ignore[arg-type]
        finally:
            reopened.close()
        assert state is not None and state != AffectState()
        assert [m.content for m in transcript] == ["I failed my driving test today."]
        assert not (tmp_path / "data" / "state.db").exists()


async def test_the_server_bounds_chroma_requests_by_its_configured_timeout(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """``mcp --timeout`` reaches the memory the tools use, not only the start-up check."""
    config = ServerConfig(data_dir=tmp_path / "data", timeout=2.5)
    async with open_tools(config, embedder=embedder) as served:
        assert served._memory.timeout == 2.5  # the one memory every tool call goes through
