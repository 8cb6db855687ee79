"""The MCP ``recall`` tool's ``where``: only the memories meeting it, ``top_k`` of them, and a
bad filter refused in one line naming the field and the value (in process, on a real store)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.integrations.mcp_tools import MemoryTools
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from affect_memory.state.sqlite import SQLiteStateStore
from tests.plugin.memory.test_filters import QUERY, corpus

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def tools(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> Iterator[MemoryTools]:
    """The tools over Ann's corpus (agent x a small minority)."""
    memory = ChromaMemory(":memory:", collection=f"t{uuid.uuid4().hex}", embedder=embedder)
    memory.add(corpus())
    store = SQLiteStateStore(tmp_path / "state.db")
    yield MemoryTools(memory, store, EmbeddingIntentGate(embedder), clock=lambda: NOW)
    memory.close()
    store.close()


async def test_recall_with_where_returns_top_k_of_the_matching_memories(
    tools: MemoryTools,
) -> None:
    unfiltered = await tools.recall(QUERY, "ann", 10)
    assert not any(hit["id"].startswith("x") for hit in unfiltered["results"])
    found = await tools.recall(QUERY, "ann", 3, 0.0, {"agent_id": "x"})
    assert [hit["id"][0] for hit in found["results"]] == ["x", "x", "x"]
    family = await tools.recall(QUERY, "ann", 10, 0.0, {"extra.project": {"$in": ["family"]}})
    assert sorted(hit["id"] for hit in family["results"]) == ["x2", "x3"]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"agent": "x"}, "where: unknown field 'agent' = 'x'"),
        ({"agent_id": {"$nin": ["x"]}}, "where: agent_id has unknown operator '$nin'"),
        ({"extra.project": {"k": "v"}}, "where: extra.project has unknown operator 'k'"),
    ],
)
async def test_a_bad_where_is_one_line_naming_the_field_and_value(
    tools: MemoryTools, where: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await tools.recall(QUERY, "ann", 3, 0.0, where)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
