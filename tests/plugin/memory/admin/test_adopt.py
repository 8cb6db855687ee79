"""Adopting a collection another tool wrote: recalled with the documented defaults, scoped to
its users, refused in another space with the fix, and never changed."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings
from langchain_chroma import Chroma
from langchain_core.embeddings import Embeddings

from affect_memory.errors import StoreError, WrongSpaceError
from affect_memory.kernel import InvalidInputError, MemoryCandidate, rank_candidates
from affect_memory.memory.admin.adopt import ADOPTION_DEFAULTS, AdoptedCollection, FieldMapping
from affect_memory.memory.chroma.collections import stored_configuration
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import SentenceTransformerEmbedder

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
NOTES = [
    ("n1", "I moved to Berlin last week.", "ann", "2026-05-25T10:00:00+00:00"),
    ("n2", "I used to live in Lisbon, near the river.", "ann", "2025-09-01T10:00:00+00:00"),
    ("n3", "My sister visits in July.", "ann", "2026-04-01T10:00:00+00:00"),
    ("n4", "I live in Oslo with two cats.", "bob", "2026-05-30T10:00:00+00:00"),
    ("n5", "Bob's bike is red.", "bob", "2026-01-15T10:00:00+00:00"),
]


class ModelEmbeddings(Embeddings):
    """LangChain's embeddings interface over the bundled model, as a LangChain user has it."""

    def __init__(self, model: SentenceTransformerEmbedder) -> None:
        self._model = model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The model's vectors of ``texts``."""
        return [list(map(float, row)) for row in self._model.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        """The model's vector of one query."""
        return [float(x) for x in self._model.embed_query(text)]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Any]:
    client = chromadb.PersistentClient(
        path=str(tmp_path), settings=Settings(anonymized_telemetry=False)
    )
    yield client
    client.close()


def _langchain(
    client: Any, embedder: SentenceTransformerEmbedder, name: str = "notes", **options: Any
) -> Chroma:
    """``NOTES`` written by langchain_chroma.Chroma, with LangChain's own metadata."""
    store = Chroma(
        collection_name=name, embedding_function=ModelEmbeddings(embedder), client=client, **options
    )
    store.add_texts(
        [text for _, text, _, _ in NOTES],
        metadatas=[
            {"source": "chat", "user": user, "created_at": stamp} for _, _, user, stamp in NOTES
        ],
        ids=[ident for ident, _, _, _ in NOTES],
    )
    return store


def _everything(client: Any, name: str) -> tuple[Any, ...]:
    collection = client.get_collection(name)
    got = collection.get(include=["documents", "metadatas", "embeddings"])
    order = np.argsort(got["ids"])
    return (
        [got["ids"][i] for i in order],
        [got["documents"][i] for i in order],
        [got["metadatas"][i] for i in order],
        np.asarray(got["embeddings"])[order],
        stored_configuration(collection),
        collection.metadata,
        collection.count(),
    )


def _assert_unchanged(before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
    assert before[:3] == after[:3] and before[4:] == after[4:]
    np.testing.assert_array_equal(before[3], after[3])  # same process, same stored bits


def test_a_langchain_collection_is_recalled_with_the_defaults_and_left_unchanged(
    tmp_path: Path, client: Any, embedder: SentenceTransformerEmbedder
) -> None:
    langchain = _langchain(client, embedder, collection_metadata={"hnsw:space": "cosine"})
    before = _everything(client, "notes")
    fields = FieldMapping(user="user", timestamp="created_at")
    with AdoptedCollection(str(tmp_path), "notes", embedder=embedder, fields=fields) as adopted:
        result = adopted.recall("Where do I live now?", "ann", now=NOW, top_k=3)
        assert result.results[0].id == "n1"  # current beats stale
        assert {hit.id for hit in result.results} == {"n1", "n2", "n3"}  # only ann's
        for hit in result.results:
            assert (hit.significance, hit.recall_count, hit.emotional_valence, hit.episode) == (
                0.5, 0, 0.0, 0.0,
            )  # fmt: skip
        # Ranked as the kernel ranks the same candidates with the documented defaults.
        pool = adopted.candidates("Where do I live now?", "ann", now=NOW)
        expected = rank_candidates(list(pool), now=NOW, limit=3)
        assert [s.candidate.id for s in expected] == [hit.id for hit in result.results]
        assert [s.score for s in expected] == pytest.approx(
            [h.score for h in result.results], abs=1e-9
        )
        assert {c.timestamp for c in pool} == {"2026-05-25T10:00:00.000000+00:00",
            "2025-09-01T10:00:00.000000+00:00", "2026-04-01T10:00:00.000000+00:00"}  # fmt: skip
        bob = adopted.recall("Where do I live now?", "bob", now=NOW)
        assert [hit.id for hit in bob.results] == ["n4", "n5"]
        survey = adopted.survey()
        assert survey.users == {"ann": 3, "bob": 2} and survey.left_out_count == 0
        assert survey.defaulted == dict.fromkeys(ADOPTION_DEFAULTS, 5)
    _assert_unchanged(before, _everything(client, "notes"))
    assert langchain.similarity_search("Oslo", k=1)[0].page_content == NOTES[3][1]


def test_an_l2_collection_is_refused_with_the_fix(
    tmp_path: Path, client: Any, embedder: SentenceTransformerEmbedder
) -> None:
    _langchain(client, embedder)  # LangChain's default: Chroma's l2
    with pytest.raises(WrongSpaceError) as refused:
        AdoptedCollection(
            str(tmp_path), "notes", embedder=embedder, fields=FieldMapping(user="user")
        )
    message = str(refused.value)
    assert "'l2' distance space" in message and "Fix: import it" in message
    assert "collection_metadata={'hnsw:space': 'cosine'}" in message and "\n" not in message


def test_importing_makes_the_rows_memories_of_their_users_and_changes_nothing(
    tmp_path: Path, client: Any, embedder: SentenceTransformerEmbedder
) -> None:
    _langchain(client, embedder)  # l2: cannot be recalled as it is, but can be imported
    before = _everything(client, "notes")
    fields = FieldMapping(user="user", timestamp="created_at")
    with ChromaMemory(tmp_path / "memories", embedder=embedder) as memory:
        with AdoptedCollection(
            str(tmp_path), "notes", embedder=embedder, fields=fields, check_space=False
        ) as adopted:
            report = adopted.import_into(memory)
            assert (report.written, report.already, report.left_out_count) == (5, 0, 0)
            assert adopted.import_into(memory).already == 5  # a rerun adds nothing
        assert memory.stats().users == {"ann": 3, "bob": 2}
        (n1,) = memory.get(["n1"], user_id="ann")
        assert (n1.significance, n1.episode, n1.emotional_valence, n1.recall_count) == (
            0.5, False, 0.0, 0,
        )  # fmt: skip
        assert n1.timestamp == "2026-05-25T10:00:00.000000+00:00"
        hits = memory.recall("Where do I live now?", "ann", now=NOW, top_k=1).results
        assert [hit.id for hit in hits] == ["n1"]
    _assert_unchanged(before, _everything(client, "notes"))


def test_a_raw_collection_of_one_owner_keeps_its_own_affect_fields_and_names_bad_rows(
    tmp_path: Path, client: Any, embedder: SentenceTransformerEmbedder
) -> None:
    raw = client.create_collection(
        "raw", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    texts = ["I love the sea.", "The sea scares me.", "Sea trip next week.", "Sea salt.", "Sea!"]
    raw.add(
        ids=["r1", "r2", "r3", "r4", "r5"],
        embeddings=embedder.embed_documents(texts),
        documents=texts,
        metadatas=[
            {"when": 1780000000, "importance": 0.9, "mood": 0.8},  # mapped affect fields kept
            {"when": "2026-05-01T08:00:00"},  # zoneless: read as UTC (assume_utc)
            {"kind": "note"},  # no timestamp: the default
            {"when": "soon"},  # unusable: left out, named
            {"when": 1780000000, "importance": "high"},  # malformed: skipped by the mapper
        ],
    )
    fields = FieldMapping(
        timestamp="when", significance="importance", emotional_valence="mood", assume_utc=True
    )
    with AdoptedCollection(
        str(tmp_path), "raw", embedder=embedder, fields=fields, owner="ann",
        default_timestamp="2026-01-01T00:00:00Z",
    ) as adopted:  # fmt: skip
        result = adopted.recall("the sea", "ann", now=NOW, top_k=5)
        by_id = {hit.id: hit for hit in result.results}
        assert set(by_id) == {"r1", "r2", "r3"} and set(result.skipped) == {"r4", "r5"}
        assert (by_id["r1"].significance, by_id["r1"].emotional_valence) == (0.9, 0.8)
        assert by_id["r2"].timestamp == "2026-05-01T08:00:00.000000+00:00"
        assert by_id["r3"].timestamp == "2026-01-01T00:00:00.000000+00:00"
        assert adopted.recall("the sea", "bob", now=NOW).results == ()  # one owner
        survey = adopted.survey()
        assert survey.users == {"ann": 3} and survey.left_out_count == 2  # r5: import refuses
        assert survey.left_out["r4"].startswith("when is not an ISO-8601 timestamp, got 'soon'")


def test_an_adopted_collection_needs_one_way_to_name_users_and_the_right_model(
    tmp_path: Path, client: Any, embedder: SentenceTransformerEmbedder
) -> None:
    raw = client.create_collection(
        "raw", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    raw.add(ids=["a"], embeddings=[[1.0, 0.0, 0.0]], documents=["tiny"])
    with pytest.raises(InvalidInputError, match="not neither"):
        AdoptedCollection(str(tmp_path), "raw", embedder=embedder)
    with pytest.raises(InvalidInputError, match="not both"):
        AdoptedCollection(
            str(tmp_path), "raw", embedder=embedder, owner="ann", fields=FieldMapping(user="u")
        )
    with pytest.raises(StoreError, match=r"3-dimensional vectors but .* embeds in 384"):
        AdoptedCollection(str(tmp_path), "raw", embedder=embedder, owner="ann")
    with pytest.raises(StoreError, match=r"no collection 'nope' .*\(present: raw\)"):
        AdoptedCollection(str(tmp_path), "nope", embedder=embedder, owner="ann")


def test_the_engine_can_retrieve_from_an_adopted_collection(
    tmp_path: Path, client: Any, embedder: SentenceTransformerEmbedder
) -> None:
    import asyncio

    from affect_memory.kernel import AffectState
    from affect_memory.kernel.protocols import RetrievalInput

    _langchain(client, embedder, collection_metadata={"hnsw:space": "cosine"})
    fields = FieldMapping(user="user", timestamp="created_at")
    with AdoptedCollection(str(tmp_path), "notes", embedder=embedder, fields=fields) as adopted:
        retriever = adopted.retriever_for("bob")
        request = RetrievalInput(query="Where do I live?", state=AffectState(), limit=2, now=NOW)
        found: Sequence[MemoryCandidate] = asyncio.run(retriever.retrieve(request))
        assert {c.id for c in found} == {"n4", "n5"}


def test_adopt_from_the_shell_surveys_imports_and_refuses_in_one_line(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[4]
    writer = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    _langchain(writer, embedder, collection_metadata={"hnsw:space": "cosine"})
    _langchain(writer, embedder, name="flat")  # l2
    writer.close()

    def adopt(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "affect_memory", "adopt", *args, "--data-dir", str(tmp_path)],
            cwd=root, capture_output=True, text=True, timeout=300,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"},
        )  # fmt: skip

    fields = ["--user-field", "user", "--timestamp-field", "created_at"]
    survey = adopt("notes", *fields, "--json")
    assert survey.returncode == 0, survey.stderr
    assert json.loads(survey.stdout)["users"] == {"ann": 3, "bob": 2}
    text = adopt("notes", *fields)
    assert (
        "users (field 'user'): ann 3, bob 2" in text.stdout and "nothing was written" in text.stdout
    )
    refused = adopt("flat", *fields)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "'l2' distance space" in refused.stderr and "Fix: import it" in refused.stderr
    imported = adopt("flat", *fields, "--import")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith("imported 5 memories into the collections under 'memories'")
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, create=False) as memory:
        assert memory.stats().users == {"ann": 3, "bob": 2}
    neither = adopt("notes")
    assert neither.returncode == 2 and "one of the arguments --user-field --owner" in neither.stderr


def test_adopting_one_of_our_own_user_collections_is_refused_in_one_line(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    from affect_memory.cli.main import main

    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([{"id": "m1", "text": "I live in Oslo.", "user_id": "alice",
                     "timestamp": "2026-05-01T10:00:00+00:00"}], progress=False)  # fmt: skip
        name = memory.collection_for("alice")
    with pytest.raises(InvalidInputError, match="affect-memory's own collection of user 'alice'"):
        AdoptedCollection(str(tmp_path / "chroma"), name, owner="bob", embedder=embedder)
    code = main(["adopt", name, "--owner", "bob", "--import", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not adopted" in err, err
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, create=False) as memory:
        assert memory.count("bob") == 0 and memory.count("alice") == 1


def _raw_collection(
    path: Path,
    embedder: SentenceTransformerEmbedder,
    texts: list[str],
    metadatas: list[dict[str, Any]],
) -> None:
    """A collection ``raw`` written with raw chromadb at ``path``: ids r1, r2, ... of ``texts``."""
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    raw = client.create_collection(
        "raw", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    raw.add(
        ids=[f"r{at}" for at in range(1, len(texts) + 1)],
        embeddings=embedder.embed_documents(texts),
        documents=texts,
        metadatas=metadatas,
    )
    client.close()


def test_the_survey_counts_only_rows_import_writes_and_prints_no_raw_control_byte(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    from affect_memory.cli.main import main

    _raw_collection(
        tmp_path / "chroma",
        embedder,
        ["I keep bees.", "Bees again.", "Nul user.", "Escape user."],
        [
            {"user": "ann", "when": 1780000000},
            {"user": "ann", "when": 1780000000, "significance": 5.0},  # import refuses it
            {"user": "n\x00l", "when": 1780000000},  # a NUL: no user id
            {"user": "e\x1bsc", "when": 1780000000},  # a valid id with a control character
        ],
    )
    fields = ["--user-field", "user", "--timestamp-field", "when", "--data-dir", str(tmp_path)]
    assert main(["adopt", "raw", *fields, "--json"]) == 0
    survey = json.loads(capsys.readouterr().out)
    assert survey["users"] == {"ann": 1, "e\x1bsc": 1} and survey["left_out"] == 2
    assert main(["adopt", "raw", *fields]) == 0
    text = capsys.readouterr().out
    assert "\x00" not in text and "\x1b" not in text and "'e\\x1bsc' 1" in text, text
    assert "recall it with affect_memory.AdoptedCollection" in text  # an importable name
    assert main(["adopt", "raw", *fields, "--import"]) == 0
    assert "imported 2 memories" in capsys.readouterr().out
    assert main(["adopt", "raw", *fields, "--default-timestamp", "x"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "--default-timestamp is not an ISO-8601 timestamp, got 'x'" in line


def test_an_import_writes_the_memory_index_that_index_names(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    from affect_memory.cli.main import main

    _raw_collection(
        tmp_path / "chroma", embedder, ["I keep bees."], [{"user": "ann", "when": 1780000000}]
    )
    index = tmp_path / "elsewhere.sqlite3"
    argv = ["adopt", "raw", "--user-field", "user", "--timestamp-field", "when", "--import"]
    assert main([*argv, "--data-dir", str(tmp_path), "--index", str(index)]) == 0
    assert "imported 1 memory into" in capsys.readouterr().out
    assert index.exists() and not (tmp_path / "chroma" / "affect-memory-index.sqlite3").exists()
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, index=str(index)) as memory:
        assert memory.index.lexical_search("ann", "bees", 5).ids == ["r1"]
