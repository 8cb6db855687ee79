"""The memory index keeps lexical search, recall counts and newest times per user, the same on
SQLite (a file, or in memory) and PostgreSQL; recall, the engine and ``get`` read its counts.

``IndexContract`` runs on every backend; the PostgreSQL run uses a schema of its own (skipped
with one line when no server answers, except under CI=true).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import RetrievalInput
from affect_memory.memory.index.lexical.analyzer import document_terms, query_terms
from affect_memory.memory.records import MAX_RECALL_COUNT
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.state.postgres_fixture import server_url, temporary_schema

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Factory = Callable[..., ChromaMemory]


def record(ident: str, text: str, user: str = "ann", days: float = 1.0, **fields: Any) -> dict:
    """A record ``days`` before ``NOW``."""
    stamp = (NOW - timedelta(days=days)).isoformat()
    return {"id": ident, "text": text, "user_id": user, "timestamp": stamp, **fields}


def bm25(query: str, texts: dict[str, str]) -> dict[str, float]:
    """Okapi BM25 of every matching text, from the analyzer's terms, written out in full."""
    docs = {ident: document_terms(text) for ident, text in texts.items()}
    n = len(docs)
    avg = sum(length for _, length in docs.values()) / n
    scores: dict[str, float] = {}
    for term in query_terms(query):
        df = sum(1 for counts, _ in docs.values() if term in counts)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for ident, (counts, length) in docs.items():
            tf = counts.get(term, 0)
            if tf:
                part = idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg))
                scores[ident] = scores.get(ident, 0.0) + part
    return scores


GARDEN = {
    "m1": "I keep bees on the roof of my flat.",
    "m2": "My sister keeps chickens and bees in her garden.",
    "m3": "I moved to Berlin last spring.",
    "m4": "The garden needs watering every evening in summer.",
}


class IndexContract:
    """What every index backend must do."""

    @pytest.fixture
    def make(self) -> Factory:
        raise NotImplementedError

    @pytest.fixture
    def memory(self, make: Factory) -> ChromaMemory:
        return make()

    def test_lexical_search_ranks_by_closed_form_bm25_per_user(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record(ident, text) for ident, text in GARDEN.items()])
        memory.add([record("b1", "Bees everywhere: bees, bees, bees.", user="bob")])
        hits = memory.index.lexical_search("ann", "Where does my sister keep her bees?", 10)
        expected = bm25("Where does my sister keep her bees?", GARDEN)
        assert hits.ids == sorted(expected, key=lambda ident: -expected[ident])
        assert hits.scores.dtype == np.float64
        assert hits.scores.tolist() == pytest.approx([expected[i] for i in hits.ids], rel=1e-12)
        assert memory.index.lexical_search("bob", "sister garden", 10).ids == []
        assert memory.index.lexical_search("cyd", "bees", 10).ids == []
        alone = bm25("bees", GARDEN)
        assert memory.index.lexical_search("ann", "bees", 1).ids == [max(alone, key=alone.get)]

    def test_a_query_without_searchable_terms_finds_nothing(self, memory: ChromaMemory) -> None:
        memory.add([record(ident, text) for ident, text in GARDEN.items()])
        for query in ("", "   ", "Where was it? Who did it?", "?!"):
            hits = memory.index.lexical_search("ann", query, 5)
            assert hits.ids == [] and len(hits.scores) == 0
        for bad in (0, -1, True, 1.5, 10_001):
            with pytest.raises(InvalidInputError, match="limit must be an integer"):
                memory.index.lexical_search("ann", "bees", bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="user_id"):
            memory.index.lexical_search("", "bees", 5)

    def test_equal_scores_are_ordered_by_id(self, memory: ChromaMemory) -> None:
        memory.add([record(f"x{i}", "water the tomatoes") for i in (3, 1, 2)])
        memory.add([record("y", "tomatoes in the greenhouse, water daily")])
        hits = memory.index.lexical_search("ann", "water tomatoes", 2)
        assert hits.ids == ["x1", "x2"] and hits.scores[0] == hits.scores[1]

    def test_forget_and_upsert_change_the_postings_and_statistics(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record(ident, text) for ident, text in GARDEN.items()])
        assert memory.forget(["m2"], user_id="ann") == ("m2",)
        left = {ident: text for ident, text in GARDEN.items() if ident != "m2"}
        hits = memory.index.lexical_search("ann", "garden bees", 10)
        expected = bm25("garden bees", left)
        assert dict(zip(hits.ids, hits.scores.tolist(), strict=True)) == pytest.approx(expected)
        memory.upsert([record("m1", "I sold the beehives and bought a piano.")])
        assert "m1" not in memory.index.lexical_search("ann", "roof flat", 10).ids
        assert memory.index.lexical_search("ann", "piano", 10).ids == ["m1"]
        audit = memory.index.audit("ann")
        assert (audit.doc_count, audit.counted_docs, audit.pending) == (3, 3, 0)
        assert audit.total_length == audit.counted_length and audit.postings_ok

    def test_newest_epoch_follows_adds_and_forgets(self, memory: ChromaMemory) -> None:
        assert memory.index.newest_epoch("ann") is None
        memory.add([record("old", "an old note", days=30), record("new", "a new note", days=2)])
        assert memory.index.newest_epoch("ann") == (NOW - timedelta(days=2)).timestamp()
        memory.forget(["new"], user_id="ann")
        assert memory.index.newest_epoch("ann") == (NOW - timedelta(days=30)).timestamp()
        assert memory.index.newest_epoch("bob") is None

    def test_memory_count_follows_adds_upserts_and_forgets(self, memory: ChromaMemory) -> None:
        assert memory.index.memory_count("ann") == 0
        memory.add([record(ident, text) for ident, text in GARDEN.items()])
        assert memory.index.memory_count("ann") == len(GARDEN)
        memory.upsert([record("m1", "I sold the beehives and bought a piano.")])
        assert memory.index.memory_count("ann") == len(GARDEN)
        memory.forget(["m2"], user_id="ann")
        assert memory.index.memory_count("ann") == len(GARDEN) - 1
        assert memory.index.memory_count("bob") == 0

    def test_rehearsal_reads_the_embeddings_the_index_keeps_when_asked(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record("m1", "tea in the garden"), record("m2", "a walk by the river")])
        held = memory.index.audit("ann").embeddings
        read = memory.index.rehearsal("ann", ["m2", "gone", "m1"], fields=True, embeddings=True)
        assert read.ranked is not None and read.ranked.embeddings is not None
        assert read.ranked.embeddings == [held["m2"], None, held["m1"]]
        assert all(isinstance(blob, bytes) for blob in (held["m1"], held["m2"]))
        plain = memory.index.rehearsal("ann", ["m1"], fields=True)
        assert plain.ranked is not None and plain.ranked.embeddings is None
        assert plain.ranked.texts == read.ranked.texts[2:]

    def test_a_turn_counts_once_per_memory_however_often_it_is_applied(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record("m1", "bees"), record("m2", "garden", recall_count=5)])
        first = memory.apply_turn_writes(
            "t1", user_id="ann", recalled_ids=["m1", "m2", "gone"], recalled_at=NOW
        )
        assert (first.incremented, first.missing) == (("m1", "m2"), ("gone",))
        again = memory.apply_turn_writes(
            "t1", user_id="ann", recalled_ids=["m1", "m2"], recalled_at=NOW
        )
        assert (again.incremented, again.already_applied) == ((), ("m1", "m2"))
        earlier = NOW - timedelta(days=3)
        memory.apply_turn_writes("t0", user_id="ann", recalled_ids=["m1"], recalled_at=earlier)
        rehearsal = memory.index.rehearsal("ann", ["m2", "m1", "nope"])
        assert rehearsal.recall_counts.dtype == np.int64
        assert rehearsal.recall_counts.tolist() == [6, 2, 0]
        assert rehearsal.found.tolist() == [True, True, False]
        # The later turn's time stays: a late replay of an earlier turn never moves it back.
        assert rehearsal.last_recalled[:2].tolist() == [NOW.timestamp(), NOW.timestamp()]
        assert math.isnan(rehearsal.last_recalled[2])
        assert rehearsal.last_recalled_at[1] == NOW.isoformat(timespec="microseconds")

    def test_get_reports_the_index_counts_while_chroma_keeps_the_ingest_values(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record("m1", "bees", recall_count=2)])
        memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m1"], recalled_at=NOW)
        (stored,) = memory.get(["m1"], user_id="ann")
        assert stored.recall_count == 3
        assert stored.last_recalled_at == NOW.isoformat(timespec="microseconds")
        raw = memory._collections.of("ann", create=False)
        assert raw.get(ids=["m1"], include=["metadatas"])["metadatas"][0]["recall_count"] == 2

    def test_an_upsert_replaces_the_counts_with_the_records(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "bees")])
        memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m1"], recalled_at=NOW)
        memory.upsert([record("m1", "bees again", recall_count=7)])
        assert memory.index.rehearsal("ann", ["m1"]).recall_counts.tolist() == [7]
        memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m1"], recalled_at=NOW)
        assert memory.index.rehearsal("ann", ["m1"]).recall_counts.tolist() == [7]  # t1 counted

    def test_the_count_stops_at_the_largest_exact_one(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "bees", recall_count=MAX_RECALL_COUNT)])
        memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m1"], recalled_at=NOW)
        assert memory.get(["m1"], user_id="ann")[0].recall_count == MAX_RECALL_COUNT

    def test_recall_and_the_engine_read_the_counts_the_turns_wrote(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record(ident, text) for ident, text in GARDEN.items()])
        for turn in range(3):
            memory.apply_turn_writes(
                f"t{turn}", user_id="ann", recalled_ids=["m2"], recalled_at=NOW
            )
        hits = {h.id: h for h in memory.recall("my sister's bees", "ann", now=NOW).results}
        assert hits["m2"].recall_count == 3 and hits["m1"].recall_count == 0
        request = RetrievalInput(query="my sister's bees", state=AffectState(), limit=4, now=NOW)
        found = asyncio.run(memory.retriever_for("ann").retrieve(request))
        assert {c.id: c.recall_count for c in found}["m2"] == 3


class TestSQLiteFile(IndexContract):
    """An index file beside an embedded store."""

    @pytest.fixture
    def make(self, tmp_path: Path, embedder: Embedder) -> Iterator[Factory]:
        opened: list[ChromaMemory] = []

        def make(**kwargs: Any) -> ChromaMemory:
            memory = ChromaMemory(tmp_path / "chroma", embedder=embedder, **kwargs)
            opened.append(memory)
            return memory

        yield make
        for memory in opened:
            memory.close()

    def test_the_default_index_lives_in_the_chroma_directory_and_survives_reopening(
        self, make: Factory, tmp_path: Path
    ) -> None:
        with make() as memory:
            memory.add([record("m1", "bees on the roof")])
            memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m1"], recalled_at=NOW)
            assert memory.index.location == str(tmp_path / "chroma" / "affect-memory-index.sqlite3")
        with make() as memory:
            assert memory.index.lexical_search("ann", "roof", 5).ids == ["m1"]
            assert memory.get(["m1"], user_id="ann")[0].recall_count == 1


class TestSQLiteInMemory(IndexContract):
    """The process's in-memory index beside the in-process Chroma store."""

    @pytest.fixture
    def make(self, embedder: Embedder) -> Iterator[Factory]:
        import uuid

        opened: list[ChromaMemory] = []
        prefix = f"t{uuid.uuid4().hex[:12]}"

        def make(**kwargs: Any) -> ChromaMemory:
            memory = ChromaMemory(":memory:", collection=prefix, embedder=embedder, **kwargs)
            opened.append(memory)
            return memory

        yield make
        for memory in opened:
            memory.close()


class TestPostgres(IndexContract):
    """A PostgreSQL index (a schema of its own) beside an embedded store."""

    @pytest.fixture
    def make(self, tmp_path: Path, embedder: Embedder) -> Iterator[Factory]:
        url = server_url()
        opened: list[ChromaMemory] = []
        with temporary_schema(url) as schema:

            def make(**kwargs: Any) -> ChromaMemory:
                memory = ChromaMemory(
                    tmp_path / "chroma", embedder=embedder, index=f"{url}?schema={schema}", **kwargs
                )
                opened.append(memory)
                return memory

            yield make
            for memory in opened:
                memory.close()


def test_every_backend_returns_the_same_bits(tmp_path: Path, embedder: Embedder) -> None:
    texts = {
        f"m{i}": f"{GARDEN[f'm{1 + i % 4}']} note {i} bees {'garden ' * (i % 3)}"
        for i in range(40)
    }
    url = server_url()
    found: list[tuple[list[str], list[float]]] = []
    with temporary_schema(url) as schema:
        for index in (str(tmp_path / "index.sqlite3"), f"{url}?schema={schema}"):
            chroma = tmp_path / f"chroma-{len(found)}"
            with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
                memory.add([record(ident, text) for ident, text in texts.items()])
                hits = memory.index.lexical_search("ann", "bees in the garden, note 7", 25)
                found.append((hits.ids, hits.scores.tolist()))
    assert found[0] == found[1]  # same computation on the same integers: identical
