"""The index holds what ranking reads of each Chroma row, so recall reads Chroma only for rows
it lacks: every write sets those fields (an upsert of an unchanged text too), an index written
before them is filled by the next process's backfill and ranks the same meanwhile (from
Chroma), and a row ranking cannot score is still read from Chroma and skipped or refused."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.errors import IsolationError
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.index.consistency.checks import assert_consistent
from tests.plugin.memory.index.consistency.test_sync import raw_collection

STAMP = "2025-03-01T12:00:00+00:00"
NOW = "2025-06-01T12:00:00+00:00"
TOPICS = ("bees", "piano", "the garden", "my sister", "a trip to Lisbon", "the new job")


def notes(count: int) -> list[dict[str, Any]]:
    """Ann's memories with varied affect, so ranking depends on every field."""
    rng = np.random.default_rng(7)
    return [
        {
            "id": f"m{i}",
            "text": f"note {i} about {TOPICS[i % len(TOPICS)]} and {TOPICS[(i * 5) % 6]}",
            "user_id": "ann",
            "timestamp": f"2025-0{1 + i % 5}-1{i % 10}T08:00:00+00:00",
            "significance": float(rng.random()),
            "emotional_valence": float(rng.uniform(-1, 1)),
            "episode": bool(i % 4 == 0),
        }
        for i in range(count)
    ]


QUERIES = ("bees in the garden", "how is my sister", "Lisbon", "piano practice", "work")


def recalled(memory: ChromaMemory) -> list[list[tuple[str, float, str | None]]]:
    """Every query's hits (id, score, timestamp) at two moods."""
    return [
        [(hit.id, hit.score, hit.timestamp) for hit in result.results]
        for mood in (0.0, -0.7)
        for query in QUERIES
        for result in [memory.recall(query, "ann", now=NOW, top_k=6, mood_valence=mood)]
    ]


class Stages:
    """Counts the stages a memory's observer reports."""

    def __init__(self) -> None:
        """No stage seen yet."""
        self.seen: dict[str, int] = {}

    def __call__(self, stage: str, seconds: float) -> None:
        """Count one report of ``stage``."""
        self.seen[stage] = self.seen.get(stage, 0) + 1


def test_recall_reads_no_chroma_row_the_index_holds(tmp_path: Path, embedder: Embedder) -> None:
    stages = Stages()
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, observer=stages) as memory:
        memory.add(notes(40))
        assert_consistent(memory, ("ann",))
        stages.seen.clear()
        recalled(memory)
        assert "chroma_get" not in stages.seen  # lexical-only members: one get of embeddings
        # (none here: every member is among Chroma's nearest at 40 memories)


def test_an_index_without_the_fields_ranks_the_same_until_the_backfill_fills_it(
    tmp_path: Path, embedder: Embedder
) -> None:
    chroma, index = tmp_path / "chroma", str(tmp_path / "index.sqlite3")
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        memory.add(notes(40))
        expected = recalled(memory)

        def before_migration_3(tx: Any) -> None:
            tx.run(
                "UPDATE index_docs SET doc_text = NULL, stamp = NULL, significance = NULL, "
                "valence = NULL, episode = NULL, embedding = NULL"
            )
            tx.run("UPDATE index_users SET ranked_fields = 0")

        memory.index.backend.write(before_migration_3)
        assert recalled(memory) == expected  # from Chroma's rows
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        assert recalled(memory) == expected  # the first read backfilled the fields
        assert_consistent(memory, ("ann",))
        ranked = memory.index.audit("ann").ranked
        assert all(fields[0] is not None for fields in ranked.values())
        assert all(blob is not None for blob in memory.index.audit("ann").embeddings.values())


def test_every_write_sets_the_fields_even_of_an_unchanged_text(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        first = notes(3)
        memory.add(first)
        changed = [{**first[1], "significance": 0.95, "episode": True, "emotional_valence": -0.5}]
        memory.upsert(changed)
        fields = memory.index.audit("ann").ranked["m1"]
        stamp = "2025-02-11T08:00:00.000000+00:00"  # canonical
        assert fields[:5] == (first[1]["text"], stamp, 0.95, -0.5, True)
        assert_consistent(memory, ("ann",))
        hit = memory.recall(first[1]["text"], "ann", now=NOW, top_k=1).results[0]
        assert (hit.id, hit.significance, hit.emotional_valence) == ("m1", 0.95, -0.5)


def test_a_row_ranking_cannot_score_is_read_from_chroma_and_skipped(
    tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(notes(5))
        good = raw_collection(memory, "ann").get(ids=["m0"], include=["metadatas"])
        meta = {**good["metadatas"][0], "significance": "very"}
        raw_collection(memory, "ann").add(
            ids=["bad"],
            documents=["a note about bees written by another tool"],
            metadatas=[meta],
            embeddings=np.asarray(embedder.embed_documents(["bees"]), dtype=np.float32),
        )
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        with caplog.at_level(logging.WARNING):
            result = memory.recall("bees", "ann", now=NOW, top_k=6)
        assert "bad" in result.skipped and "bad" not in [hit.id for hit in result.results]
        assert "skipped stored memory 'bad'" in caplog.text
        assert memory.index.audit("ann").ranked["bad"][:5] == (None,) * 5
        assert_consistent(memory, ("ann",))


def test_a_row_of_another_user_is_still_refused(tmp_path: Path, embedder: Embedder) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(notes(5))
        good = raw_collection(memory, "ann").get(ids=["m0"], include=["metadatas"])
        raw_collection(memory, "ann").add(
            ids=["intruder"],
            documents=["bob's note about bees"],
            metadatas=[{**good["metadatas"][0], "user_id": "bob"}],
            embeddings=np.asarray(embedder.embed_documents(["bees"]), dtype=np.float32),
        )
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.index.newest_epoch("ann")  # the first read indexes the row
        assert memory.index.audit("ann").ranked["intruder"][:5] == (None,) * 5
        with pytest.raises(IsolationError, match="'intruder' of another user"):
            memory.recall("bees", "ann", now=NOW, top_k=6)


def test_get_refuses_a_row_of_another_user_as_recall_does(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(notes(5))
        good = raw_collection(memory, "ann").get(ids=["m0"], include=["metadatas"])
        raw_collection(memory, "ann").add(
            ids=["intruder"],
            documents=["bob's note about bees"],
            metadatas=[{**good["metadatas"][0], "user_id": "bob"}],
            embeddings=np.asarray(embedder.embed_documents(["bees"]), dtype=np.float32),
        )
        for read in (
            lambda: memory.get(["m0", "intruder"], user_id="ann"),
            lambda: memory.recall("bees", "ann", now=NOW, top_k=6),
        ):
            with pytest.raises(IsolationError, match="'intruder' of another user"):
                read()
        assert [record.id for record in memory.get(["m0"], user_id="ann")] == ["m0"]
