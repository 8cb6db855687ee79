"""The MCP data-rights tools over a real embedded store and SQLite state store: list a page,
export what ingest reads back, erase one user (memories and conversations) and no other."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.integrations.mcp_tools import MemoryTools
from affect_memory.kernel.errors import AffectMemoryError
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from affect_memory.state.sqlite import SQLiteStateStore
from tests.plugin.memory.data_rights_fixtures import IDS, USER_A, USER_B, assert_no_trace, seed
from tests.plugin.state.user_data import held, mentions, seed_conversations


@pytest.fixture
def setup(
    embedder: Embedder, tmp_path: Path
) -> Iterator[tuple[MemoryTools, ChromaMemory, SQLiteStateStore]]:
    """Tools over a seeded embedded store and a seeded state store."""
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    store = SQLiteStateStore(tmp_path / "state.db")
    seed(memory)
    tools = MemoryTools(
        memory,
        store,
        EmbeddingIntentGate(embedder),
        clock=lambda: datetime(2026, 6, 1, tzinfo=UTC),
    )
    yield tools, memory, store
    store.close()
    memory.close()


async def test_list_and_export_return_whole_records_with_recall_counts(
    setup: tuple[MemoryTools, ChromaMemory, SQLiteStateStore],
) -> None:
    tools, memory, _ = setup
    page = await tools.list_memories(USER_A, 2, 1)
    assert page["total"] == len(IDS) and page["offset"] == 1
    assert [line["id"] for line in page["memories"]] == [r.id for r in memory.list(USER_A)][1:3]
    exported = await tools.export_memories(USER_A)
    assert exported["count"] == len(IDS)
    assert exported["records"] == list(memory.export(USER_A))
    assert {line["id"]: line["recall_count"] for line in exported["records"]}["m1"] == 2


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda t: t.list_memories(USER_A, 0, 0), "limit"),
        (lambda t: t.list_memories(USER_A, 5, -1), "offset"),
        (lambda t: t.list_memories("", 5, 0), "user_id"),
        (lambda t: t.export_memories(7), "user_id"),
        (lambda t: t.erase_user(USER_A, False), "confirm"),
        (lambda t: t.erase_user(USER_A, "yes"), "confirm"),
    ],
)
async def test_bad_arguments_are_refused_naming_the_field_and_erase_nothing(
    setup: tuple[MemoryTools, ChromaMemory, SQLiteStateStore], call: object, named: str
) -> None:
    tools, memory, _ = setup
    with pytest.raises(AffectMemoryError, match=named):
        await call(tools)  # type: ignore[operator]
    assert memory.count(USER_A) == len(IDS)


async def test_erase_user_removes_memories_and_conversations_of_one_user_only(
    setup: tuple[MemoryTools, ChromaMemory, SQLiteStateStore], tmp_path: Path
) -> None:
    tools, memory, store = setup
    await seed_conversations(store)
    erased = await tools.erase_user(USER_A, True)
    assert erased["memories"] == len(IDS)
    assert erased["conversations"] == ["ann-1", "ann-2", "team"]
    assert_no_trace(memory, USER_A)
    assert memory.count(USER_B) == len(IDS)
    rows = held("sqlite", str(tmp_path / "state.db"))
    assert mentions(rows, USER_A) == [] and mentions(rows, USER_B)
