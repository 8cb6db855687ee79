"""The index holds each memory's embedding as Chroma returns it, so recall takes the cosine of
a member only the lexical search found from the index, without a Chroma ``get``, and to the
same bits; a member whose embedding the index lacks, holds of another dimension or is
rewriting (a pending journal entry) is read from Chroma as before."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.memory.settings import RecallSettings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.index.consistency.checks import assert_consistent, chroma_embeddings
from tests.plugin.memory.index.test_ranked_fields import NOW, QUERIES, Stages, notes

NARROW = RecallSettings(dense_candidates=8, lexical_candidates=24)
"""A pool whose lexical hits are mostly outside Chroma's nearest."""


def recalled(memory: ChromaMemory) -> list[list[dict[str, Any]]]:
    """Every query's hits, every field, at two moods, over a narrow dense pool."""
    return [
        [hit.to_json() for hit in result.results]
        for mood in (0.0, -0.7)
        for query in QUERIES
        for result in [
            memory.recall(query, "ann", now=NOW, top_k=6, mood_valence=mood, settings=NARROW)
        ]
    ]


def rewrite(memory: ChromaMemory, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Change the index behind the memory's back."""
    memory.index.backend.write(lambda tx: tx.run(statement, params))


def gets(stages: Stages, memory: ChromaMemory) -> tuple[list[list[dict[str, Any]]], int]:
    """The recall's hits and how many Chroma gets it made."""
    stages.seen.clear()
    hits = recalled(memory)
    return hits, stages.seen.get("chroma_get", 0)


def assert_cosines_come_from_the_index(memory: ChromaMemory, stages: Stages) -> None:
    """Recall over 60 notes reads no Chroma row, and ranks exactly as when the index's
    embeddings are gone and the lexical-only members are read from Chroma."""
    memory.add(notes(60))
    assert_consistent(memory, ("ann",))
    from_index, calls = gets(stages, memory)
    assert calls == 0  # no Chroma get: neither rows nor embeddings
    rewrite(memory, "UPDATE index_docs SET embedding = NULL")
    from_chroma, calls = gets(stages, memory)
    assert calls > 0  # lexical-only members there were, read from Chroma now
    assert from_index == from_chroma


def assert_read_from_chroma_after(
    tmp_path: Path, embedder: Embedder, statement: str, params: tuple[Any, ...]
) -> None:
    """After ``statement`` changes the index, recall over 60 notes reads Chroma again and ranks
    exactly as before."""
    stages = Stages()
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, observer=stages) as memory:
        memory.add(notes(60))
        expected, _ = gets(stages, memory)
        rewrite(memory, statement, params)
        hits, calls = gets(stages, memory)
        assert calls > 0 and hits == expected


def test_lexical_only_members_take_their_cosine_from_the_index(
    tmp_path: Path, embedder: Embedder
) -> None:
    stages = Stages()
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, observer=stages) as memory:
        assert_cosines_come_from_the_index(memory, stages)


def test_over_a_chroma_server_the_index_holds_the_values_the_http_client_returns(
    tmp_path: Path, embedder: Embedder, chroma_server: str
) -> None:
    """An HTTP client parses embeddings from decimals (not exact float32 values): the index
    keeps those, so the cosine from its copy is the same bits as one from Chroma's get."""
    stages = Stages()
    with ChromaMemory(
        chroma_server,
        collection=f"emb-{uuid.uuid4().hex[:10]}",
        index=tmp_path / "index.sqlite3",
        embedder=embedder,
        observer=stages,
    ) as memory:
        assert_cosines_come_from_the_index(memory, stages)


def test_an_embedding_of_another_dimension_is_read_from_chroma(
    tmp_path: Path, embedder: Embedder
) -> None:
    assert_read_from_chroma_after(
        tmp_path,
        embedder,
        "UPDATE index_docs SET embedding = ?",
        (np.ones(3, "<f4").tobytes(),),
    )


def test_members_held_and_not_held_mix_to_the_same_ranking(
    tmp_path: Path, embedder: Embedder
) -> None:
    # every other member's embedding gone: a current-state query's topic term ("how is my
    # sister") takes those from Chroma and the rest from the index, in one product
    assert_read_from_chroma_after(
        tmp_path, embedder, "UPDATE index_docs SET embedding = NULL WHERE doc_key % 2 = 0", ()
    )


def test_a_member_with_a_pending_journal_entry_is_read_from_chroma(
    tmp_path: Path, embedder: Embedder
) -> None:
    # A forget in flight (due later, so no reader settles it): Chroma decides whether the
    # member is still there, as before the index held embeddings.
    assert_read_from_chroma_after(
        tmp_path,
        embedder,
        "INSERT INTO index_journal (user_key, memory_id, op, intent, due) "
        "SELECT user_key, memory_id, 'forget', '{}', ? FROM index_docs",
        (time.time() + 3600,),
    )


def test_every_write_stores_chromas_embedding(tmp_path: Path, embedder: Embedder) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        first = notes(4)
        memory.add(first)
        assert_consistent(memory, ("ann",))
        memory.upsert([{**first[1], "significance": 0.9}])  # the text unchanged
        memory.upsert([{**first[2], "text": "an entirely new text about tea"}])
        assert_consistent(memory, ("ann",))
        held = memory.index.audit("ann").embeddings
        vectors = chroma_embeddings(memory, "ann")
        assert set(held) == set(vectors) == {"m0", "m1", "m2", "m3"}
        for ident, vector in vectors.items():
            blob = held[ident]
            assert blob is not None and len(blob) == 4 * embedder.dimension
            assert np.array_equal(np.frombuffer(blob, "<f4"), np.asarray(vector, np.float32))


def test_the_consistency_check_sees_an_embedding_unlike_chromas(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(notes(4))
        blob = memory.index.audit("ann").embeddings["m2"]
        assert blob is not None
        changed = np.frombuffer(blob, "<f4").copy()
        changed[0] = np.nextafter(changed[0], np.float32(2.0))
        rewrite(
            memory,
            "UPDATE index_docs SET embedding = ? WHERE memory_id = 'm2'",
            (changed.tobytes(),),
        )
        with pytest.raises(AssertionError, match="other embeddings for \\['m2'\\]"):
            assert_consistent(memory, ("ann",))
        rewrite(memory, "UPDATE index_docs SET embedding = NULL WHERE memory_id = 'm3'")
        rewrite(memory, "UPDATE index_docs SET embedding = ? WHERE memory_id = 'm2'", (blob,))
        with pytest.raises(AssertionError, match="other embeddings for \\['m3'\\]"):
            assert_consistent(memory, ("ann",))
