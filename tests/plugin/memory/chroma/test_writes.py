"""Embedding ahead in ``BatchWriter``: the next chunk embeds in a helper thread while one is
written, the journal's announce, write and settle keep their order, an add never embeds what
it skips, and a failure mid-batch leaves nothing stored and no thread (a recording embedder of
small vectors, and chunks of 8, so no model is loaded)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromadb.api.models.Collection import Collection

from affect_memory.errors import StoreError
from affect_memory.memory.chroma import writes
from affect_memory.memory.index.consistency.session import WriteSession
from affect_memory.memory.store import ChromaMemory
from tests.plugin.memory.index.consistency.checks import assert_consistent

STAMP = "2025-03-01T12:00:00+00:00"
CHUNK = 8


class Recorder:
    """The events of a write in the order they happen: embeddings (and in which thread), the
    journal's announcements and settlements, and Chroma's writes, each by its first id."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, bool]] = []
        self.before_write: Callable[[str], None] = lambda first: None
        """Called with a chunk's first id as Chroma is about to write it."""
        self._lock = threading.Lock()

    def note(self, event: str, first: str) -> None:
        on_caller = threading.current_thread() is threading.main_thread()
        with self._lock:
            self.events.append((event, first, on_caller))

    def journal(self) -> list[tuple[str, str]]:
        """The announce / write / settle events, in order."""
        return [(e, f) for e, f, _ in self.events if e in ("announce", "write", "settle")]

    def at(self, event: str, first: str) -> int:
        return next(i for i, (e, f, _) in enumerate(self.events) if (e, f) == (event, first))


class RecordingEmbedder:
    """8-dimensional unit vectors from a text's bytes; each call is noted with its thread."""

    name = "recording-embedder"
    dimension = 8

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.texts: list[str] = []
        self.held: dict[str, threading.Event] = {}
        """Chunks (by first id) whose embedding waits until the test sets their event."""
        self.entered: dict[str, threading.Event] = {}

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        first = ident_of(texts[0])
        self.recorder.note("embed", first)
        self.texts.extend(texts)
        self.entered.setdefault(first, threading.Event()).set()
        if first in self.held:
            assert self.held[first].wait(30), "the test never let the embedding go on"
        rows = np.array(
            [np.frombuffer(text.encode()[:8].ljust(8, b"_"), np.uint8) for text in texts],
            dtype=np.float32,
        )
        rows += 1.0
        self.recorder.note("embedded", first)
        unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return unit

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


def ident_of(text: str) -> str:
    return text.split()[0]


def record(user: str, number: int) -> dict[str, Any]:
    ident = f"{user}{number:03d}"
    return {"id": ident, "text": f"{ident} a note on bees", "user_id": user, "timestamp": STAMP}


def helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("affect-memory embed-ahead")]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """A recorder of the journal and Chroma's writes, with chunks of ``CHUNK`` records."""
    monkeypatch.setattr(writes, "WRITE_CHUNK", CHUNK)
    seen = Recorder()
    announce, settle = WriteSession.announce_writes, WriteSession.settle_writes
    add, upsert = Collection.add, Collection.upsert

    def announced(self: WriteSession, records: Sequence[Any]) -> None:
        seen.note("announce", records[0].id)
        announce(self, records)

    def settled(self: WriteSession, records: Sequence[Any]) -> None:
        seen.note("settle", records[0].id)
        settle(self, records)

    def written(method: Any) -> Any:
        def write(self: Collection, *args: Any, **kwargs: Any) -> Any:
            seen.before_write(kwargs["ids"][0])
            seen.note("write", kwargs["ids"][0])
            return method(self, *args, **kwargs)

        return write

    monkeypatch.setattr(WriteSession, "announce_writes", announced)
    monkeypatch.setattr(WriteSession, "settle_writes", settled)
    monkeypatch.setattr(Collection, "add", written(add))
    monkeypatch.setattr(Collection, "upsert", written(upsert))
    yield seen
    assert not helpers()


def next_embedding_started(
    embedder: RecordingEmbedder, firsts: Sequence[str]
) -> Callable[[str], None]:
    """A hook for a chunk's write that waits until the next chunk's embedding has begun."""
    following = dict(itertools.pairwise(firsts))

    def wait(first: str) -> None:
        if first in following:
            started = embedder.entered.setdefault(following[first], threading.Event())
            assert started.wait(30), f"the chunk after {first} was not embedded during its write"

    return wait


def chunk_firsts(sizes: dict[str, int]) -> list[str]:
    """The first id of every chunk a write of ``sizes`` records per user makes, in order."""
    return [f"{user}{at:03d}" for user, size in sizes.items() for at in range(0, size, CHUNK)]


@pytest.mark.parametrize("kind", ["add", "upsert"])
def test_the_next_chunk_embeds_ahead_and_the_journal_keeps_its_order(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    batch = [record("ann", i) for i in range(20)] + [record("bob", i) for i in range(11)]
    firsts = chunk_firsts({"ann": 20, "bob": 11})
    journals = {}
    for ahead in (False, True):
        recorder.events.clear()
        monkeypatch.setenv(writes.EMBED_AHEAD_ENV, "1" if ahead else "0")
        embedder = RecordingEmbedder(recorder)
        if ahead:  # each chunk's write waits until the next chunk's embedding is under way
            recorder.before_write = next_embedding_started(embedder, firsts)
        with ChromaMemory(tmp_path / f"ahead-{ahead}", embedder=embedder) as memory:
            getattr(memory, kind)(batch)
            assert memory.count("ann") == 20 and memory.count("bob") == 11
            assert_consistent(memory, ("ann", "bob"))
        journals[ahead] = recorder.journal()
        if not ahead:
            assert all(on_caller for _, _, on_caller in recorder.events)
            continue
        for before, after in itertools.pairwise(firsts):
            # the next chunk (the next user's first, too) embeds off the calling thread while
            # this chunk is written, and is embedded before its own announcement
            assert recorder.at("embed", after) < recorder.at("write", before)
            assert not recorder.events[recorder.at("embed", after)][2]
            assert recorder.at("embedded", after) < recorder.at("announce", after)
    expected = [(event, first) for first in firsts for event in ("announce", "write", "settle")]
    assert journals[False] == journals[True] == expected


def test_an_add_never_embeds_ahead_what_it_skips(tmp_path: Path, recorder: Recorder) -> None:
    embedder = RecordingEmbedder(recorder)
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        stored = [record("bob", 0), record("bob", 3), record("cat", 12), record("dan", 1)]
        memory.add(stored)
        embedder.texts.clear()
        batch = (
            [record("ann", i) for i in range(10)]
            + [record("bob", i) for i in range(5)]  # one chunk: bob's three new ones ahead
            + [record("cat", i) for i in range(14)]  # the first chunk all new: ahead
            + [record("dan", i) for i in range(10)]  # dan has one of the first: not ahead
        )
        report = memory.add(batch)
        assert sorted(report.skipped) == ["bob000", "bob003", "cat012", "dan001"]
        assert sorted(ident_of(text) for text in embedder.texts) == sorted(
            r["id"] for r in batch if r["id"] not in report.skipped
        )
        assert_consistent(memory, ("ann", "bob", "cat", "dan"))
    ahead = {first for event, first, caller in recorder.events if event == "embed" and not caller}
    assert {"bob001", "cat000"} <= ahead  # bob's new ones, cat's first chunk
    assert "dan000" not in ahead  # embedded under dan's lock, once the add knew what it skips


def test_a_failure_mid_batch_stores_nothing_and_ends_the_pending_embedding(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = RecordingEmbedder(recorder)
    add = Collection.add
    calls = [0]

    def refused_second(self: Collection, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:  # chunk ann008 is written while chunk ann016 embeds ahead
            assert embedder.entered.setdefault("ann016", threading.Event()).wait(30)
            assert len(helpers()) == 1
            threading.Timer(0.2, embedder.held["ann016"].set).start()  # ends after the raise
            raise ValueError("Chroma refused the chunk")
        return add(self, *args, **kwargs)

    batch = [record("ann", i) for i in range(20)]
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        embedder.held["ann016"] = threading.Event()
        monkeypatch.setattr(Collection, "add", refused_second)
        with pytest.raises(StoreError, match="nothing of this add was kept"):
            memory.add(batch)
        assert not helpers()
        assert memory.count("ann") == 0
        assert recorder.journal()[:4] == [
            ("announce", "ann000"), ("write", "ann000"), ("settle", "ann000"),
            ("announce", "ann008"),
        ]  # fmt: skip
        assert ("announce", "ann016") not in recorder.journal()
        assert_consistent(memory, ("ann",))
        monkeypatch.setattr(Collection, "add", add)
        assert memory.add(batch).written == 20  # the same call again completes it
        assert_consistent(memory, ("ann",))
