"""A turn that surfaces a memory whose add is in Chroma but not yet settled in the index still
counts its recall, once: the count waits for the writer (live) or settles its journal entry
(killed), and the add settling or replaying afterwards does not set it back to the record's.

This is how the fleet run lost 2 of 12,024 recalls: another worker's turn had just written
the memory to Chroma (or died doing so) when this turn surfaced and counted it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import TurnWriteReport
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.index.consistency.checks import assert_consistent
from tests.plugin.state.postgres_fixture import server_url, temporary_schema

STAMP = "2025-03-01T12:00:00+00:00"
LATER = "2025-03-02T12:00:00+00:00"


def note(ident: str, text: str) -> dict[str, Any]:
    return {"id": ident, "text": text, "user_id": "ann", "timestamp": STAMP}


@pytest.fixture(params=["sqlite", "postgresql"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "index.sqlite3")
        return
    url = server_url()
    with temporary_schema(url) as schema:
        yield f"{url}?schema={schema}"


@pytest.fixture
def pair(
    chroma_server: str, index: str, embedder: Embedder
) -> Iterator[tuple[ChromaMemory, ChromaMemory]]:
    """Two stores over one server and one index (two hosts), both past their first read."""
    prefix = f"unsettled{os.getpid()}{time.monotonic_ns()}"
    with (
        ChromaMemory(chroma_server, collection=prefix, embedder=embedder, index=index) as writer,
        ChromaMemory(chroma_server, collection=prefix, embedder=embedder, index=index) as counter,
    ):
        writer.add([note("m0", "bees on the roof")])
        assert counter.index.lexical_search("ann", "bees", 5).ids == ["m0"]
        yield writer, counter


def _write_to_chroma(memory: ChromaMemory, embedder: Embedder, record: MemoryRecord) -> None:
    collection = memory._collections.of("ann", create=False)
    collection.add(
        ids=[record.id],
        documents=[record.text],
        embeddings=embedder.embed_documents([record.text]),
        metadatas=[record.to_metadata()],
    )


def test_a_recall_of_a_memory_whose_writer_died_before_settling_counts(
    pair: tuple[ChromaMemory, ChromaMemory], embedder: Embedder
) -> None:
    writer, counter = pair
    record = MemoryRecord.model_validate(note("t1-msg", "more bees in the garden"))
    collection = writer._collections.of("ann", create=False)
    with writer.index.writing("ann", collection) as dying:
        dying.announce_writes([record])
        _write_to_chroma(writer, embedder, record)
        dying._open.clear()  # the writer dies here: Chroma written, nothing settled
    report = counter.apply_turn_writes(
        "t2", user_id="ann", recalled_ids=["t1-msg", "m0"], recalled_at=LATER
    )
    assert (report.incremented, report.missing) == (("t1-msg", "m0"), ())
    assert counter.index.rehearsal("ann", ["t1-msg"]).recall_counts.tolist() == [1]
    # The dead writer's turn is replayed: its add finds the memory and leaves the count.
    replay = writer.apply_turn_writes("t1", user_id="ann", new_record=record)
    assert replay.stored_new is False
    assert writer.index.rehearsal("ann", ["t1-msg", "m0"]).recall_counts.tolist() == [1, 1]
    assert_consistent(writer, ("ann",))


def test_a_recall_of_a_memory_a_live_writer_has_not_settled_waits_for_it_and_counts(
    pair: tuple[ChromaMemory, ChromaMemory], embedder: Embedder
) -> None:
    writer, counter = pair
    record = MemoryRecord.model_validate(note("t1-msg", "more bees in the garden"))
    collection = writer._collections.of("ann", create=False)
    asked = threading.Event()
    backend = counter.index.backend
    plain_lock = backend.lock

    def lock(name: str, *, timeout: float) -> AbstractContextManager[None]:
        asked.set()
        return plain_lock(name, timeout=timeout)

    reports: list[TurnWriteReport] = []

    def count() -> None:
        reports.append(
            counter.apply_turn_writes(
                "t2", user_id="ann", recalled_ids=["t1-msg"], recalled_at=LATER
            )
        )

    with writer.index.writing("ann", collection) as live:
        live.announce_writes([record])
        _write_to_chroma(writer, embedder, record)
        backend.lock = lock  # type: ignore[method-assign]
        worker = threading.Thread(target=count)
        worker.start()
        while not asked.is_set() and worker.is_alive():  # it waits for the lock, or gives up
            time.sleep(0.01)
        live.settle_writes([record])  # the add's own counts (0) land now
    worker.join()
    backend.lock = plain_lock  # type: ignore[method-assign]
    assert [(r.incremented, r.missing) for r in reports] == [(("t1-msg",), ())]
    assert counter.index.rehearsal("ann", ["t1-msg"]).recall_counts.tolist() == [1]
    assert_consistent(counter, ("ann",))
