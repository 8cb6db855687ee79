"""A vector segment a killed write left unreadable is rebuilt on opening, from Chroma's rows
and the memory index's embeddings, with nothing lost; a rebuild killed midway resumes."""

from __future__ import annotations

import logging
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import affect_memory.memory.chroma.segment_repair as segment_repair
from affect_memory.memory.chroma.layout import DEFAULT_COLLECTION, user_collection_name
from affect_memory.memory.chroma.segment_repair import (
    METADATA_FILE,
    DamagedSegment,
    damaged_segments,
    mark,
    metadata_problem,
    rebuild_collection,
    set_aside,
)
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.index.consistency.checks import assert_consistent, chroma_embeddings

NOW = "2026-06-01T12:00:00Z"
TEXTS = [
    "I live in Lisbon, in a small flat near the river.",
    "I moved to Berlin last week and I'm still unpacking boxes.",
    "My sister Ana is visiting in July.",
    "I work as a nurse at the city hospital.",
    "We adopted a grey cat called Miso.",
    "The tram to work was late again this morning.",
]


def _records(user: str) -> list[dict[str, object]]:
    return [
        {"id": f"{user}-{at}", "text": text, "user_id": user,
         "timestamp": f"2026-05-{at + 10:02d}T09:00:00Z"}
        for at, text in enumerate(TEXTS)
    ]  # fmt: skip


def _segment(store: Path, user: str) -> Path:
    """The directory of ``user``'s vector segment, from Chroma's own SQLite file."""
    name = user_collection_name(DEFAULT_COLLECTION, user)
    with sqlite3.connect(store / "chroma.sqlite3") as database:
        (segment_id,) = database.execute(
            "SELECT s.id FROM segments s JOIN collections c ON c.id = s.collection "
            "WHERE s.scope = 'VECTOR' AND c.name = ?",
            (name,),
        ).fetchone()
    return store / str(segment_id)


def _as_a_new_process() -> None:
    """Forget chromadb's system of each path, as the process after a killed one starts (it
    keeps one per embedded path per process, with the segments it loaded)."""
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()


Snapshot = tuple[list[tuple[str, float]], dict[str, np.ndarray]]


def _snapshot(memory: ChromaMemory, user: str) -> Snapshot:
    result = memory.recall("Where do I live?", user, now=NOW, top_k=6)
    vectors = chroma_embeddings(memory, user)
    return (
        [(hit.id, hit.score) for hit in result.results],
        {ident: np.asarray(v, dtype=np.float64) for ident, v in vectors.items()},
    )


def _assert_same(got: Snapshot, want: Snapshot) -> None:
    """The same hits in the same order, scores and vectors within float32 rounding (Chroma
    normalises a cosine collection's vectors again as they go back in)."""
    assert [ident for ident, _ in got[0]] == [ident for ident, _ in want[0]]
    assert [score for _, score in got[0]] == pytest.approx([score for _, score in want[0]])
    assert set(got[1]) == set(want[1])
    for ident, vector in got[1].items():
        assert np.allclose(vector, want[1][ident], rtol=0, atol=1e-6), ident


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Path:
    path = tmp_path / "chroma"
    with ChromaMemory(path, embedder=embedder) as memory:
        memory.add(_records("ann") + _records("bob"))
    return path


def test_a_store_whose_segments_read_needs_no_repair(store: Path) -> None:
    assert damaged_segments(store) == []
    assert metadata_problem(_segment(store, "ann") / METADATA_FILE) is None


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_an_unreadable_segment_is_rebuilt_on_opening_with_nothing_lost(
    damage: str, store: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    with ChromaMemory(store, embedder=embedder) as memory:
        before = {user: _snapshot(memory, user) for user in ("ann", "bob")}
    metadata = _segment(store, "ann") / METADATA_FILE
    data = metadata.read_bytes()
    damaged = b"" if damage == "empty" else data[: len(data) // 2]
    metadata.write_bytes(damaged)
    _as_a_new_process()
    (found,) = damaged_segments(store)
    assert found.collection == user_collection_name(DEFAULT_COLLECTION, "ann")
    assert found.problem is not None and not found.interrupted
    bob = sorted(path.name for path in _segment(store, "bob").iterdir())
    with caplog.at_level(logging.WARNING), ChromaMemory(store, embedder=embedder) as memory:
        assert memory.count("ann") == len(TEXTS)
        after = {user: _snapshot(memory, user) for user in ("ann", "bob")}
        # the index and Chroma agree row for row, texts, fields and embedding bits
        assert assert_consistent(memory, ("ann", "bob")) == {"ann": len(TEXTS), "bob": len(TEXTS)}
    assert "rebuilt the HNSW index of user 'ann'" in caplog.text
    assert f"{len(TEXTS)} rows upserted again" in caplog.text
    for user in ("ann", "bob"):
        _assert_same(after[user], before[user])
    # the damaged files are kept beside the rebuilt segment; bob's segment was not touched
    (kept,) = store.glob("*.damaged-*")
    assert kept.name.startswith(f"{_segment(store, 'ann').name}.damaged-")
    assert (kept / METADATA_FILE).read_bytes() == damaged
    assert sorted(path.name for path in _segment(store, "bob").iterdir()) == bob
    assert damaged_segments(store) == []


def test_a_rebuild_killed_after_the_move_resumes_on_the_next_open(
    store: Path, embedder: Embedder
) -> None:
    with ChromaMemory(store, embedder=embedder) as memory:
        before = _snapshot(memory, "ann")
    segment = _segment(store, "ann")
    (segment / METADATA_FILE).write_bytes(b"")
    (found,) = damaged_segments(store)
    _as_a_new_process()
    assert set_aside(store, found) is not None  # marked and moved; the process dies here
    assert not segment.exists()
    (pending,) = damaged_segments(store)
    assert pending.interrupted and pending.problem is None
    with ChromaMemory(store, embedder=embedder) as memory:
        _assert_same(_snapshot(memory, "ann"), before)
        assert assert_consistent(memory, ("ann",)) == {"ann": len(TEXTS)}
    assert damaged_segments(store) == []


def test_a_row_without_an_indexed_embedding_is_embedded_again(
    tmp_path: Path, embedder: Embedder
) -> None:
    import chromadb

    client = chromadb.EphemeralClient()
    collection = client.create_collection("repair-rows", embedding_function=None)
    ids, texts = ["a", "b", "c"], TEXTS[:3]
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float64)
    collection.add(ids=ids, embeddings=vectors.tolist(), documents=texts,
                   metadatas=[{"n": at} for at in range(3)])  # fmt: skip
    embedded: list[list[str]] = []

    def embed(documents: list[str]) -> np.ndarray:
        embedded.append(list(documents))
        return np.asarray(embedder.embed_documents(documents))

    segment = DamagedSegment("none", "repair-rows", None, interrupted=True)
    rows = rebuild_collection(
        tmp_path,
        segment,
        collection,
        lambda wanted, _: [None if i == "b" else vectors[ids.index(i)] for i in wanted],
        embed,
        batch=2,
    )
    assert rows == ids and embedded == [[texts[1]]]
    got = collection.get(ids=ids, include=["embeddings", "documents", "metadatas"])
    assert got["documents"] == texts and [m["n"] for m in got["metadatas"]] == [0, 1, 2]
    assert np.allclose(np.asarray(got["embeddings"]), vectors, atol=1e-6)


def test_metadata_files_are_told_apart(tmp_path: Path) -> None:
    path = tmp_path / METADATA_FILE
    assert metadata_problem(path) is None  # never synced: none yet
    path.write_bytes(b"")
    assert metadata_problem(path) == f"{METADATA_FILE} is empty"
    # dimensionality 46 is the byte b".", pickle's STOP, inside the data
    whole = pickle.dumps({"dimensionality": 46, "id_to_label": {}, "label_to_id": {}})
    path.write_bytes(whole)
    assert metadata_problem(path) is None and metadata_problem(path, whole=True) is None
    path.write_bytes(whole[:-3])
    problem = metadata_problem(path)
    assert problem is not None and problem.startswith(f"{METADATA_FILE} does not parse")
    # a cut that happens to end on a STOP byte passes the quick check, not the full parse
    path.write_bytes(whole[: whole.index(pickle.STOP) + 1])
    assert metadata_problem(path) is None and metadata_problem(path, whole=True) is not None
    path.write_bytes(pickle.dumps([1, 2, 3]))
    assert metadata_problem(path, whole=True) == f"{METADATA_FILE} holds no HNSW metadata"
    path.write_bytes(pickle.dumps(DamagedSegment("s", "c", None)))
    assert metadata_problem(path, whole=True) is None  # a pickled class is not loaded, nor judged


def test_a_marked_segment_that_reads_is_rebuilt_afresh_not_kept(
    store: Path, embedder: Embedder
) -> None:
    segment = _segment(store, "ann")
    found = DamagedSegment(segment.name, user_collection_name(DEFAULT_COLLECTION, "ann"), None)
    mark(store, found)  # a rebuild that died after its upserts began: the segment reads
    (pending,) = damaged_segments(store)
    assert pending.interrupted and pending.problem is None
    _as_a_new_process()
    with ChromaMemory(store, embedder=embedder) as memory:
        assert assert_consistent(memory, ("ann", "bob")) == {"ann": len(TEXTS), "bob": len(TEXTS)}
        assert len(memory.recall("Where do I live?", "ann", now=NOW, top_k=6).results) == 6
    assert not list(store.glob("*.damaged-*"))  # a partial rebuild is not kept as evidence
    assert damaged_segments(store) == []


def test_setting_aside_a_readable_marked_segment_deletes_it(store: Path) -> None:
    segment = _segment(store, "ann")
    found = DamagedSegment(segment.name, user_collection_name(DEFAULT_COLLECTION, "ann"), None)
    assert set_aside(store, found) is None
    assert not segment.exists()
    (pending,) = damaged_segments(store)
    assert pending.interrupted  # marked first, so a kill here still rebuilds on the next open


def test_a_finding_that_no_longer_holds_under_the_lock_moves_nothing(
    store: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store object of the process may be rewriting the file when the scan reads it;
    under the user's lock the file is read again, whole, before anything moves."""
    stale = DamagedSegment(
        _segment(store, "ann").name, user_collection_name(DEFAULT_COLLECTION, "ann"), "torn"
    )
    monkeypatch.setattr(segment_repair, "damaged_segments", lambda _directory: [stale])
    _as_a_new_process()
    with ChromaMemory(store, embedder=embedder) as memory:
        assert memory.count("ann") == len(TEXTS)
    assert not list(store.glob("*.damaged-*")) and not list(store.glob(".affect-memory-rebuild-*"))


def test_a_rebuild_that_fails_keeps_its_marker_and_the_other_users_working(
    store: Path,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (_segment(store, "ann") / METADATA_FILE).write_bytes(b"")
    _as_a_new_process()

    def refuse(*_args: object, **_kwargs: object) -> list[str]:
        raise RuntimeError("no room on the disk")

    monkeypatch.setattr(segment_repair, "rebuild_collection", refuse)
    with caplog.at_level(logging.ERROR), ChromaMemory(store, embedder=embedder) as memory:
        assert memory.count("bob") == len(TEXTS)
        assert [hit.id for hit in memory.recall("cat", "bob", now=NOW, top_k=1).results]
    assert "could not rebuild the HNSW index of user 'ann'" in caplog.text
    assert "RuntimeError: no room on the disk" in caplog.text
    (pending,) = damaged_segments(store)
    assert pending.interrupted  # the next open tries again
    monkeypatch.undo()
    _as_a_new_process()
    with ChromaMemory(store, embedder=embedder) as memory:
        assert assert_consistent(memory, ("ann",)) == {"ann": len(TEXTS)}


def test_only_the_latest_damaged_copies_of_a_segment_are_kept(
    store: Path, embedder: Embedder
) -> None:
    repairs = segment_repair.DAMAGED_KEPT + 2
    for repair in range(repairs):
        metadata = _segment(store, "ann") / METADATA_FILE
        metadata.write_bytes(metadata.read_bytes()[:-1] + bytes([repair]))  # no STOP byte
        _as_a_new_process()
        with ChromaMemory(store, embedder=embedder) as memory:
            assert memory.count("ann") == len(TEXTS)
    kept = sorted(store.glob(f"{_segment(store, 'ann').name}.damaged-*"))
    assert len(kept) == segment_repair.DAMAGED_KEPT
    assert (kept[-1] / METADATA_FILE).read_bytes()[-1] == repairs - 1  # the newest is kept
    assert damaged_segments(store) == []
