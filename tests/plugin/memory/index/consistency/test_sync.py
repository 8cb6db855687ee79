"""A user's index is brought in line with Chroma on first use: a store written before the index
(or by another tool, or migrated) is backfilled in pages with the counts it recorded, rows
removed behind the index's back leave it, a recreated collection starts afresh, and postings
of another analyzer are rebuilt."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.index.consistency import sync
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.index.consistency.checks import assert_consistent

STAMP = "2025-03-01T12:00:00+00:00"


def note(ident: str, text: str) -> dict[str, str]:
    """A record of ann's."""
    return {"id": ident, "text": text, "user_id": "ann", "timestamp": STAMP}


def raw_collection(memory: ChromaMemory, user: str) -> Any:
    """The user's collection through a client of its own, as another tool would write it."""
    client, lock = open_client(parse_location(memory.location))
    if lock is not None:
        lock.release()
    return client.get_collection(memory.collection_for(user))


def legacy_rows(count: int, start: int = 0) -> dict[str, Any]:
    """Rows as an affect-memory before the index wrote them: counts and turn ids in metadata."""
    rng = np.random.default_rng(start)
    vectors = rng.normal(size=(count, 384)).astype(np.float32)
    ids, texts, metas = [], [], []
    for i in range(start, start + count):
        topic = random.Random(i).choice(["bees", "piano"])
        record = MemoryRecord(
            id=f"old{i}",
            text=f"old note {i} about the {topic}",
            user_id="ann",
            timestamp=STAMP,
            recall_count=i % 5,
        )
        meta = record.to_metadata()
        meta["recall_turns"] = [f"turn-{i % 3}"]
        ids.append(record.id)
        texts.append(record.text)
        metas.append(meta)
    return {"ids": ids, "documents": texts, "metadatas": metas, "embeddings": vectors}


def test_a_store_written_before_the_index_is_backfilled_in_pages_with_its_counts(
    tmp_path: Path, embedder: Embedder, monkeypatch: Any
) -> None:
    monkeypatch.setattr(sync, "PAGE", 400)
    chroma = tmp_path / "chroma"
    with ChromaMemory(chroma, embedder=embedder, index=str(tmp_path / "old.sqlite3")) as memory:
        memory.add([note("new0", "a first note")])
        collection = raw_collection(memory, "ann")
        rows = legacy_rows(1000)
        for start in range(0, 1000, 250):
            collection.add(**{key: value[start : start + 250] for key, value in rows.items()})
    # A fresh index beside the same Chroma data: what a store written before the index has.
    with ChromaMemory(chroma, embedder=embedder, index=str(tmp_path / "new.sqlite3")) as memory:
        assert memory.index.lexical_search("ann", "old note 917", 3).ids[0] == "old917"
        assert_consistent(memory, ("ann",))
        counts = memory.index.rehearsal("ann", ["old3", "old4", "new0"]).recall_counts.tolist()
        assert counts == [3, 4, 0]
        # Turns the old store had counted (in recall_turns) are not counted again.
        replay = memory.apply_turn_writes(
            "turn-1", user_id="ann", recalled_ids=["old1", "old3"], recalled_at=STAMP
        )
        assert (replay.already_applied, replay.incremented) == (("old1",), ("old3",))
        assert memory.get(["old3"], user_id="ann")[0].recall_count == 4


def test_rows_written_or_removed_behind_the_index_are_settled_by_the_next_process(
    tmp_path: Path, embedder: Embedder
) -> None:
    chroma, index = tmp_path / "chroma", str(tmp_path / "index.sqlite3")
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        memory.add([note(f"m{i}", f"note {i}") for i in range(5)])
        collection = raw_collection(memory, "ann")
        collection.add(**{key: value[:3] for key, value in legacy_rows(3, 50).items()})
        collection.delete(ids=["m0", "m1"])
        assert memory.index.sync("ann").indexed >= 3  # this process re-checks on request
        assert_consistent(memory, ("ann",))
        collection.delete(ids=["old50"])
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:  # the next process
        assert_consistent(memory, ("ann",))
        assert "old50" not in memory.index.audit("ann").texts


def test_a_recreated_collection_is_indexed_afresh(tmp_path: Path, embedder: Embedder) -> None:
    chroma, index = tmp_path / "chroma", str(tmp_path / "index.sqlite3")
    first = [note(f"m{i}", f"bees {i}") for i in range(2)]
    second = [{**row, "text": f"piano {i}"} for i, row in enumerate(first)]
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        memory.add(first)
        memory.apply_turn_writes("t", user_id="ann", recalled_ids=["m0"], recalled_at=STAMP)
        client, lock = open_client(parse_location(memory.location))
        if lock is not None:
            lock.release()
        client.delete_collection(memory.collection_for("ann"))
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        memory.add(second)  # the same ids and count, in a new collection
        assert memory.index.lexical_search("ann", "bees", 5).ids == []
        assert memory.index.lexical_search("ann", "piano 1", 5).ids[0] == "m1"
        assert memory.index.rehearsal("ann", ["m0"]).recall_counts.tolist() == [0]
        assert_consistent(memory, ("ann",))


def test_postings_of_another_analyzer_are_rebuilt(tmp_path: Path, embedder: Embedder) -> None:
    chroma, index = tmp_path / "chroma", str(tmp_path / "index.sqlite3")
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        memory.add([note("m1", "researching bees")])
        memory.apply_turn_writes("t", user_id="ann", recalled_ids=["m1"], recalled_at=STAMP)

        def older(tx: Any) -> None:  # what an index built by an older analyzer holds
            tx.run("UPDATE index_users SET analyzer = 'words-0'")
            tx.run("UPDATE index_postings SET term = term || '-old'")

        memory.index.backend.write(older)
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        assert memory.index.lexical_search("ann", "research", 5).ids == ["m1"]
        assert memory.get(["m1"], user_id="ann")[0].recall_count == 1
        assert_consistent(memory, ("ann",))
