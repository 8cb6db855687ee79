"""Every async method of ``ChromaMemory`` takes exactly its sync twin's parameters, with the
same annotations and return type (awaited), so the two cannot drift; and returns the same."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest

from affect_memory.memory.results import WriteReport
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.test_filters import NOW, QUERY, corpus

TWINS = ("recall", "recall_many", "get", "add", "upsert", "forget")
"""The sync methods with an ``a``-prefixed twin."""

ASYNC_DEFAULTS = {("aadd", "progress"): False, ("aupsert", "progress"): False}
"""Where a default differs on purpose: no progress bar from the worker thread unless asked."""


@pytest.mark.parametrize("name", TWINS)
def test_the_async_twin_has_the_sync_signature(name: str) -> None:
    sync, twin = getattr(ChromaMemory, name), getattr(ChromaMemory, f"a{name}")
    assert inspect.iscoroutinefunction(twin) and not inspect.iscoroutinefunction(sync)
    expected, got = inspect.signature(sync), inspect.signature(twin)
    assert [(p.name, p.kind) for p in got.parameters.values()] == [
        (p.name, p.kind) for p in expected.parameters.values()
    ]
    for parameter in expected.parameters.values():
        mine = got.parameters[parameter.name]
        assert mine.annotation == parameter.annotation, parameter.name
        default = ASYNC_DEFAULTS.get((f"a{name}", parameter.name), parameter.default)
        assert mine.default == default, parameter.name
    assert got.return_annotation == expected.return_annotation
    hints, twin_hints = typing.get_type_hints(sync), typing.get_type_hints(twin)
    assert twin_hints == hints  # the same types once resolved, the return included
    assert not any(p.kind is p.VAR_KEYWORD for p in got.parameters.values())


async def test_the_async_methods_return_what_the_sync_ones_do(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        records = corpus()
        assert await memory.aadd(records[:30]) == WriteReport(30)
        again = memory.add(records[:31])  # the sync twin skips what the async one stored
        assert again == WriteReport(1, tuple(record["id"] for record in records[:30]))
        assert await memory.aadd(records[:31]) == WriteReport(0, (*again.skipped, "y30"))
        memory.add(records[31:])
        where = {"agent_id": "x"}
        assert await memory.arecall(QUERY, "ann", now=NOW, top_k=3, where=where) == memory.recall(
            QUERY, "ann", now=NOW, top_k=3, where=where
        )
        queries = [{"query": QUERY, "user_id": "ann"}, {"query": "bicycle", "user_id": "ann"}]
        assert await memory.arecall_many(queries, now=NOW, top_k=4) == memory.recall_many(
            queries, now=NOW, top_k=4
        )
        assert await memory.aget(["x0", "y3", "none"], user_id="ann") == memory.get(
            ["x0", "y3", "none"], user_id="ann"
        )
        changed = {**records[0], "text": "The bees left the garden."}
        assert await memory.aupsert([changed]) == memory.upsert([changed]) == WriteReport(1)
        assert memory.get(["y0"], user_id="ann")[0].text == "The bees left the garden."
        assert await memory.aforget(["y0"], user_id="ann") == ("y0",)
        assert memory.get(["y0"], user_id="ann") == ()
