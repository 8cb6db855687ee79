"""``AffectMemoryRetriever`` with langchain-core on a real in-memory Chroma and the real model."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from affect_memory.integrations.langchain import AffectMemoryRetriever
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from tests.contracts.recall_schema import RECALL_RESULT_KEYS

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
METADATA_KEYS = (set(RECALL_RESULT_KEYS) - {"text"}) | {"user_id"}
RECORDS = [
    {
        "id": "cat",
        "text": "I adopted a grey cat called Miso from the shelter",
        "user_id": "alice",
        "timestamp": "2026-05-20T10:00:00Z",
        "significance": 0.8,
        "emotional_valence": 0.7,
    },
    {
        "id": "dog",
        "text": "My childhood dog Biscuit died when I was twelve",
        "user_id": "alice",
        "timestamp": "2016-03-02T10:00:00Z",
        "significance": 0.9,
        "emotional_valence": -0.8,
        "episode": True,
    },
    {
        "id": "commute",
        "text": "The train to work takes forty minutes",
        "user_id": "alice",
        "timestamp": "2026-05-30T08:00:00Z",
    },
    {
        "id": "bob-cat",
        "text": "My cat is called Pepper",
        "user_id": "bob",
        "timestamp": "2026-05-30T08:00:00Z",
    },
]


@pytest.fixture
def memory(embedder: SentenceTransformerEmbedder) -> Iterator[ChromaMemory]:
    """A fresh in-memory collection holding ``RECORDS``."""
    with ChromaMemory(
        ":memory:", collection=f"lc-{uuid.uuid4().hex[:12]}", embedder=embedder
    ) as store:
        store.add(RECORDS, progress=False)
        yield store


def _check(documents: list[Document], memory: ChromaMemory, **recall: Any) -> None:
    expected = memory.recall("what is my pet called?", "alice", now=NOW, **recall).results
    assert [document.metadata["id"] for document in documents] == [hit.id for hit in expected]
    for document, hit in zip(documents, expected, strict=True):
        assert document.page_content == hit.text
        assert set(document.metadata) == METADATA_KEYS
        assert document.metadata == {
            **{key: value for key, value in hit.to_json().items() if key != "text"},
            "user_id": "alice",
        }


def test_invoke_returns_ranked_documents_with_the_score_breakdown(memory: ChromaMemory) -> None:
    retriever = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW)
    assert isinstance(retriever, BaseRetriever)
    documents = retriever.invoke("what is my pet called?")
    assert {document.metadata["id"] for document in documents} == {"cat", "dog", "commute"}
    assert documents[0].metadata["id"] == "cat"
    scores = [document.metadata["score"] for document in documents]
    assert scores == sorted(scores, reverse=True)
    dog = next(document for document in documents if document.metadata["id"] == "dog")
    assert dog.metadata["episode"] > 0, "an episode carries its bonus in the metadata"
    _check(documents, memory)


async def test_ainvoke_matches_invoke(memory: ChromaMemory) -> None:
    retriever = AffectMemoryRetriever(
        memory=memory, user_id="alice", now=NOW, top_k=2, mood_valence=-0.8
    )
    documents = await retriever.ainvoke("what is my pet called?")
    assert len(documents) == 2
    assert documents == retriever.invoke("what is my pet called?")
    _check(documents, memory, top_k=2, mood_valence=-0.8)


def test_a_polarized_mood_boosts_congruent_memories_only(memory: ChromaMemory) -> None:
    low = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW, mood_valence=-1.0)
    high = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW, mood_valence=1.0)
    query = "tell me about my pets"
    by_id = {d.metadata["id"]: d.metadata for d in low.invoke(query)}
    assert by_id["dog"]["congruence"] > 1.0 == by_id["cat"]["congruence"]
    by_id = {d.metadata["id"]: d.metadata for d in high.invoke(query)}
    assert by_id["cat"]["congruence"] > 1.0 == by_id["dog"]["congruence"]


def test_results_stay_within_the_user(memory: ChromaMemory) -> None:
    documents = AffectMemoryRetriever(memory=memory, user_id="bob", now=NOW).invoke("cat")
    assert [(d.metadata["id"], d.metadata["user_id"]) for d in documents] == [("bob-cat", "bob")]
    assert AffectMemoryRetriever(memory=memory, user_id="carol").invoke("cat") == []


def test_invoke_takes_k_for_one_call(memory: ChromaMemory) -> None:
    retriever = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW)
    # Before: LangChain dropped k, and the retriever returned its top_k documents.
    assert [d.metadata["id"] for d in retriever.invoke("what is my pet called?", k=1)] == ["cat"]
    assert len(retriever.invoke("what is my pet called?", k=2)) == 2
    assert len(retriever.invoke("what is my pet called?")) == 3
    with pytest.raises(InvalidInputError, match="AffectMemoryRetriever k must be >= 1, got 0"):
        retriever.invoke("pets", k=0)
    with pytest.raises(
        InvalidInputError, match="AffectMemoryRetriever takes only k, fetch_k and filter, got 'top'"
    ):
        retriever.invoke("pets", top=1)


async def test_ainvoke_takes_k_too(memory: ChromaMemory) -> None:
    retriever = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW)
    documents = await retriever.ainvoke("what is my pet called?", k=1)
    assert [d.metadata["id"] for d in documents] == ["cat"]


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_query_is_refused(memory: ChromaMemory, blank: str) -> None:
    retriever = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW)
    with pytest.raises(InvalidInputError, match="query must be a non-empty, non-blank"):
        retriever.invoke(blank)


def test_errors_name_each_field_once(memory: ChromaMemory) -> None:
    with pytest.raises(InvalidInputError) as raised:
        AffectMemoryRetriever(memory=memory, user_id="alice", now="2026-06-01T12:00:00")
    # Before: "AffectMemoryRetriever now now must carry a UTC offset ...".
    assert str(raised.value).startswith("AffectMemoryRetriever now must carry a UTC offset")
    with pytest.raises(InvalidInputError) as both:
        AffectMemoryRetriever(memory=memory, user_id="", top_k=0)
    assert "user_id must be a non-empty string" in str(both.value)
    assert "top_k must be >= 1, got 0" in str(both.value) and "(2 problems)" in str(both.value)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"user_id": ""}, "user_id must be a non-empty string"),
        ({"top_k": 0}, "top_k must be"),
        ({"top_k": 65}, "top_k must be between 1 and 64, got 65"),
        ({"candidates": True}, "candidates"),
        ({"mood_valence": 2.0}, "mood_valence"),
        ({"now": "2026-06-01T12:00:00"}, "now must carry a UTC offset"),
    ],
)
def test_bad_settings_name_the_field(
    memory: ChromaMemory, options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InvalidInputError, match="AffectMemoryRetriever") as caught:
        AffectMemoryRetriever(**{"memory": memory, "user_id": "alice", **options})
    assert expected in str(caught.value)


QUERY = "what is my pet called?"


def _ids(documents: list[Document]) -> list[str]:
    return [document.metadata["id"] for document in documents]


def test_k_at_construction_is_top_k(memory: ChromaMemory) -> None:
    # Before: k was silently ignored and the retriever returned its default six (here three).
    retriever = AffectMemoryRetriever(memory=memory, user_id="alice", now=NOW, k=2)
    assert retriever.top_k == 2
    assert len(retriever.invoke(QUERY)) == 2
    with pytest.raises(InvalidInputError, match=r"takes k or top_k .*, not both"):
        AffectMemoryRetriever(memory=memory, user_id="alice", k=2, top_k=2)
    with pytest.raises(InvalidInputError, match="AffectMemoryRetriever k must be >= 1, got 0"):
        AffectMemoryRetriever(memory=memory, user_id="alice", k=0)


def test_an_unknown_setting_is_refused_with_the_closest_name(memory: ChromaMemory) -> None:
    with pytest.raises(InvalidInputError) as raised:
        AffectMemoryRetriever(memory=memory, user_id="alice", topk=2)
    assert str(raised.value) == (
        "AffectMemoryRetriever takes no setting 'topk' (did you mean 'top_k'?)"
    )


def test_search_kwargs_k_as_langchain_vector_store_retrievers_take_it(
    memory: ChromaMemory,
) -> None:
    retriever = AffectMemoryRetriever(
        memory=memory, user_id="alice", now=NOW, search_kwargs={"k": 2, "fetch_k": 50}
    )
    assert len(retriever.invoke(QUERY)) == 2
    assert _ids(retriever.invoke(QUERY, k=1)) == ["cat"], "a call's k wins over search_kwargs"
    retriever.search_kwargs = {"k": 1}  # as LangChain code sets it after construction
    assert len(retriever.invoke(QUERY)) == 1
    retriever.search_kwargs = {"kk": 1}
    with pytest.raises(InvalidInputError, match="search_kwargs takes only k, fetch_k and filter"):
        retriever.invoke(QUERY)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"search_kwargs": {"kk": 2}},
            "search_kwargs takes only k, fetch_k and filter, got 'kk' (did you mean 'k'?)",
        ),
        ({"search_kwargs": {"k": 0}}, "search_kwargs k must be >= 1, got 0"),
        ({"search_kwargs": {"fetch_k": 5000}}, "search_kwargs fetch_k must be between 1 and 1024"),
        ({"search_kwargs": {"filter": "agent_id=a"}}, "search_kwargs filter must be a mapping"),
        ({"search_kwargs": [("k", 2)]}, "search_kwargs must be a mapping"),
        ({"search_kwargs": {"k": 2}, "top_k": 3}, "top_k and search_kwargs k set the same thing"),
    ],
)
def test_bad_search_kwargs_are_refused_at_construction(
    memory: ChromaMemory, options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        AffectMemoryRetriever(**{"memory": memory, "user_id": "alice", **options})
    assert str(raised.value).startswith("AffectMemoryRetriever ")
    assert expected in str(raised.value)


FILTERED = [
    {
        "id": "miso",
        "text": "My cat Miso sleeps on the radiator",
        "user_id": "alice",
        "timestamp": "2026-05-20T10:00:00Z",
        "agent_id": "pets",
        "extra": {"topic": "cats"},
    },
    {
        "id": "biscuit",
        "text": "My dog Biscuit loved the beach",
        "user_id": "alice",
        "timestamp": "2026-05-21T10:00:00Z",
        "agent_id": "pets",
        "extra": {"topic": "dogs"},
    },
    {
        "id": "vet",
        "text": "The cat's vet appointment is on Friday",
        "user_id": "alice",
        "timestamp": "2026-05-22T10:00:00Z",
        "agent_id": "calendar",
        "extra": {"topic": "cats"},
    },
]


@pytest.fixture
def tagged(embedder: SentenceTransformerEmbedder) -> Iterator[ChromaMemory]:
    """A fresh in-memory collection of memories that carry an agent and a topic."""
    with ChromaMemory(
        ":memory:", collection=f"lcf-{uuid.uuid4().hex[:12]}", embedder=embedder
    ) as store:
        store.add(FILTERED, progress=False)
        yield store


def test_filter_in_search_kwargs_and_per_call_is_recalls_where(tagged: ChromaMemory) -> None:
    retriever = AffectMemoryRetriever(
        memory=tagged, user_id="alice", now=NOW, search_kwargs={"filter": {"agent_id": "pets"}}
    )
    assert set(_ids(retriever.invoke("my cat"))) == {"miso", "biscuit"}
    assert _ids(retriever.invoke("my cat", k=1)) == ["miso"]
    topics = {"extra.topic": {"$in": ["cats"]}}
    assert set(_ids(retriever.invoke("my cat", filter=topics))) == {"miso", "vet"}, (
        "a call's filter replaces search_kwargs' filter, as LangChain merges them"
    )
    expected = tagged.recall("my cat", "alice", now=NOW, where={"agent_id": "pets"}).results
    assert _ids(retriever.invoke("my cat")) == [hit.id for hit in expected]
    with pytest.raises(InvalidInputError, match="agent"):
        retriever.invoke("my cat", filter={"agent": "pets"})


async def test_ainvoke_filters_through_the_stores_async_recall(
    tagged: ChromaMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    arecall = tagged.arecall

    async def spy(query: str, user_id: str, **options: Any) -> Any:
        calls.append(options)
        return await arecall(query, user_id, **options)

    monkeypatch.setattr(tagged, "arecall", spy)
    retriever = AffectMemoryRetriever(memory=tagged, user_id="alice", now=NOW, k=1)
    documents = await retriever.ainvoke("my cat", filter={"agent_id": "calendar"})
    assert _ids(documents) == ["vet"]
    assert calls and calls[0]["where"] == {"agent_id": "calendar"} and calls[0]["top_k"] == 1
