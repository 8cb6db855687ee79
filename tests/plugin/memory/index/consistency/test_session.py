"""A write that fails part way leaves the index as Chroma (the undo goes through the journal
too); a write that times out is left pending until it can no longer land; and a live writer's
journal entries are never settled by anyone else while it holds the user's lock."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.errors import EmbeddingError, StoreError
from affect_memory.memory.chroma import writes
from affect_memory.memory.index import memory_index
from affect_memory.memory.index.consistency import journal, session
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import DelegatingEmbedder, Embedder
from tests.plugin.memory.index.consistency.checks import assert_consistent

STAMP = "2025-03-01T12:00:00+00:00"


def note(ident: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"id": ident, "text": text, "user_id": "ann", "timestamp": STAMP, **fields}


class WallClock:
    """The ``time`` module as the index sees it, with a wall clock the test sets."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        """The wall clock: ``now``, moved only by the test."""
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class FailingOnCall(DelegatingEmbedder):
    """The real embedder, failing on its ``fail_on``-th call (a model that breaks mid-batch)."""

    def __init__(self, inner: Embedder, fail_on: int) -> None:
        super().__init__(inner)
        self.calls = 0
        self.fail_on = fail_on

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on:
            raise EmbeddingError("the model broke")
        return self._inner.embed_documents(texts)


def test_a_failed_add_or_upsert_leaves_the_index_as_chroma_put_back(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of 32, not the 512 of WRITE_CHUNK: the same two-chunk failure, a tenth the embedding.
    monkeypatch.setattr(writes, "WRITE_CHUNK", 32)
    flaky = FailingOnCall(embedder, fail_on=0)
    batch = [note(f"m{i}", f"note {i} on bees") for i in range(writes.WRITE_CHUNK + 20)]
    with ChromaMemory(tmp_path / "chroma", embedder=flaky) as memory:
        memory.add([note("keep", "an older note on bees", recall_count=4)])
        memory.apply_turn_writes("t", user_id="ann", recalled_ids=["keep"], recalled_at=STAMP)
        flaky.calls, flaky.fail_on = 0, 2  # the second chunk's embedding fails
        with pytest.raises(EmbeddingError, match="nothing of this add was kept"):
            memory.add(batch)
        assert memory.count("ann") == 1
        assert_consistent(memory, ("ann",))
        flaky.fail_on = 0
        memory.add(batch[: writes.WRITE_CHUNK])
        flaky.calls, flaky.fail_on = 0, 2
        replaced = [note("keep", "a replaced note"), *[{**r, "text": "piano"} for r in batch]]
        with pytest.raises(EmbeddingError, match="nothing of this upsert was kept"):
            memory.upsert(replaced)
        assert_consistent(memory, ("ann",))
        assert memory.index.lexical_search("ann", "piano", 5).ids == []
        assert memory.get(["keep"], user_id="ann")[0].recall_count == 5  # its count put back


def test_a_timed_out_write_stays_pending_until_it_can_no_longer_land(
    own_chroma_server: tuple[str, int],
    tmp_path: Path,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, pid = own_chroma_server
    clock = WallClock()  # what decides when a deferred entry is due (the grace is untouched)
    monkeypatch.setattr(session, "time", clock)
    monkeypatch.setattr(memory_index, "time", clock)
    announce = session.WriteSession.announce_writes

    def announce_then_stop(self: session.WriteSession, records: Any) -> None:
        announce(self, records)
        os.kill(pid, signal.SIGSTOP)  # the server hangs between the journal and the write

    index = str(tmp_path / "index.sqlite3")
    with ChromaMemory(url, embedder=embedder, index=index, timeout=1.0) as memory:
        memory.add([note("m0", "a first note")])
        monkeypatch.setattr(session.WriteSession, "announce_writes", announce_then_stop)
        try:
            with pytest.raises(StoreError, match="did not answer within 1 s"):
                memory.add([note("m1", "written while the server was stopped")])
            left = memory.index.audit("ann").pending
        finally:
            os.kill(pid, signal.SIGCONT)
        monkeypatch.setattr(session.WriteSession, "announce_writes", announce)
        assert left == 1  # not settled: the stopped server may still apply the write
        assert memory.index.lexical_search("ann", "stopped", 5).ids == []  # nor yet due
        assert memory.index.audit("ann").pending == 1
    # The server was just woken: read on through a client that gives it time to catch up.
    with ChromaMemory(url, embedder=embedder, index=index, timeout=30.0) as patient:
        due = 1.0 + session.AMBIGUOUS_GRACE  # the writer's timeout, then the grace
        clock.now += due - 0.5
        patient.index.lexical_search("ann", "stopped", 5)
        assert patient.index.audit("ann").pending == 1  # still not due
        clock.now += 1.0  # the timeout and the grace have passed
        patient.index.lexical_search("ann", "stopped", 5)
        assert patient.index.audit("ann").pending == 0
        assert_consistent(patient, ("ann",))


def test_a_live_writers_entries_wait_for_it_and_a_dead_ones_are_settled(
    chroma_server: str, tmp_path: Path, embedder: Embedder
) -> None:
    index = str(tmp_path / "index.sqlite3")
    prefix = f"live{os.getpid()}"
    with (
        ChromaMemory(chroma_server, collection=prefix, embedder=embedder, index=index) as writer,
        ChromaMemory(chroma_server, collection=prefix, embedder=embedder, index=index) as reader,
    ):
        writer.add([note("m0", "bees on the roof")])
        assert reader.index.lexical_search("ann", "bees", 5).ids == ["m0"]
        collection = writer._collections.of("ann", create=False)
        record = MemoryRecord.model_validate(note("m1", "more bees in the garden"))
        with writer.index.writing("ann", collection) as live:
            live.announce_writes([record])
            # The reader sees the entry but cannot take the lock: it leaves it to the writer.
            assert reader.index.lexical_search("ann", "garden", 5).ids == []
            assert reader.index.audit("ann").pending == 1
            vectors = embedder.embed_documents([record.text])
            collection.add(
                ids=[record.id],
                documents=[record.text],
                embeddings=vectors,
                metadatas=[record.to_metadata()],
            )
            live._open.clear()  # the writer dies here: Chroma written, nothing settled
        # Its lock is gone, so the reader's next read settles the entry by asking Chroma.
        assert reader.index.lexical_search("ann", "garden", 5).ids == ["m1"]
        assert_consistent(reader, ("ann",))
        assert journal.AMBIGUOUS_GRACE > 0


def test_a_failed_reconcile_is_one_warning_line_with_its_traceback_only_at_debug(
    tmp_path: Path,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise StoreError("Chroma went away\n  while reconciling")

    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([note("m0", "bees on the roof")])
        collection = memory._collections.of("ann", create=False)
        record = MemoryRecord.model_validate(note("m1", "more bees in the garden"))
        monkeypatch.setattr(session, "reconcile", broken)
        caplog.set_level(logging.DEBUG, logger=session.logger.name)
        with pytest.raises(RuntimeError), memory.index.writing("ann", collection) as live:
            live.announce_writes([record])
            raise RuntimeError("the write failed")
        monkeypatch.undo()
    logged = [r for r in caplog.records if r.name == session.logger.name]
    warnings = [r for r in logged if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    line = warnings[0].getMessage()
    assert line.startswith("could not reconcile 1 journal entries of user 'ann' now")
    assert "\n" not in line and "StoreError: Chroma went away while reconciling" in line
    assert warnings[0].exc_info is None
    debug = [r for r in logged if r.levelno == logging.DEBUG and r.exc_info]
    assert len(debug) == 1 and debug[0].exc_info[0] is StoreError  # type: ignore[index]
