"""The LlamaIndex pair with llama-index-core: the retriever on a real embedded Chroma store and
the real model, and the postprocessor against the kernel's scalar reference and behind
LlamaIndex's own vector retriever."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from affect_memory.integrations.llamaindex import (
    AffectMemoryLlamaRetriever,
    AffectRankingPostprocessor,
)
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, rank_candidates_reference
from affect_memory.memory.settings import RECALL_WEIGHTS
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.contracts.recall_schema import RECALL_RESULT_KEYS

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
QUERY = "what is my pet called?"
RECORDS = [
    {
        "id": "cat",
        "text": "I adopted a grey cat called Miso from the shelter",
        "user_id": "alice",
        "timestamp": "2026-05-20T10:00:00Z",
        "significance": 0.8,
        "emotional_valence": 0.7,
        "agent_id": "pets",
    },
    {
        "id": "dog",
        "text": "My childhood dog Biscuit died when I was twelve",
        "user_id": "alice",
        "timestamp": "2016-03-02T10:00:00Z",
        "significance": 0.9,
        "emotional_valence": -0.8,
        "episode": True,
        "agent_id": "pets",
    },
    {
        "id": "commute",
        "text": "The train to work takes forty minutes",
        "user_id": "alice",
        "timestamp": "2026-05-30T08:00:00Z",
        "agent_id": "travel",
    },
    {
        "id": "bob-cat",
        "text": "My cat is called Pepper",
        "user_id": "bob",
        "timestamp": "2026-05-30T08:00:00Z",
    },
]


@pytest.fixture
def memory(embedder: Embedder, tmp_path: Path) -> Iterator[ChromaMemory]:
    """A fresh embedded (on-disk) store holding ``RECORDS``."""
    with ChromaMemory(
        tmp_path / "chroma", collection=f"li-{uuid.uuid4().hex[:12]}", embedder=embedder
    ) as store:
        store.add(RECORDS, progress=False)
        yield store


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [item.node.node_id for item in nodes]


# ---------------------------------------------------------------------------------- retriever


def test_retrieve_returns_the_recall_hits_as_scored_nodes(memory: ChromaMemory) -> None:
    retriever = AffectMemoryLlamaRetriever(memory, "alice", now=NOW)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve(QUERY)
    expected = memory.recall(QUERY, "alice", now=NOW).results
    assert _ids(nodes) == [hit.id for hit in expected] and _ids(nodes)[0] == "cat"
    for item, hit in zip(nodes, expected, strict=True):
        assert isinstance(item.node, TextNode)
        assert item.node.get_content() == hit.text
        assert item.score == hit.score
        assert item.node.metadata == {
            **{key: value for key, value in hit.to_json().items() if key != "text"},
            "user_id": "alice",
        }
        assert set(item.node.metadata) == (set(RECALL_RESULT_KEYS) - {"text"}) | {"user_id"}
        for key in ("timestamp", "significance", "emotional_valence", "recall_count"):
            assert key in item.node.metadata
        shown = item.node.get_content(metadata_mode=MetadataMode.LLM)
        assert f"timestamp: {hit.timestamp}" in shown, "the LLM sees when it happened"
        assert "score:" not in shown and "congruence:" not in shown, "not the breakdown"
        assert item.node.get_content(metadata_mode=MetadataMode.EMBED) == hit.text


def test_top_k_mood_and_user_scope(memory: ChromaMemory) -> None:
    low = AffectMemoryLlamaRetriever(memory, "alice", now=NOW, top_k=2, mood_valence=-0.8)
    nodes = low.retrieve(QUERY)
    expected = memory.recall(QUERY, "alice", now=NOW, top_k=2, mood_valence=-0.8).results
    assert _ids(nodes) == [hit.id for hit in expected] and len(nodes) == 2
    assert _ids(AffectMemoryLlamaRetriever(memory, "bob", now=NOW).retrieve("cat")) == ["bob-cat"]
    assert AffectMemoryLlamaRetriever(memory, "carol").retrieve("cat") == []


async def test_aretrieve_goes_through_the_stores_async_recall(
    memory: ChromaMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    arecall = memory.arecall

    async def spy(query: str, user_id: str, **options: Any) -> Any:
        calls.append(query)
        return await arecall(query, user_id, **options)

    monkeypatch.setattr(memory, "arecall", spy)
    retriever = AffectMemoryLlamaRetriever(memory, "alice", now=NOW, top_k=2)
    nodes = await retriever.aretrieve(QUERY)
    assert calls == [QUERY]
    assert [(n.node.node_id, n.score) for n in nodes] == [
        (n.node.node_id, n.score) for n in retriever.retrieve(QUERY)
    ]


def test_where_filters_before_ranking(memory: ChromaMemory) -> None:
    retriever = AffectMemoryLlamaRetriever(
        memory, "alice", now=NOW, where={"agent_id": {"$in": ["travel"]}}
    )
    assert _ids(retriever.retrieve(QUERY)) == ["commute"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"user_id": ""}, "user_id must be a non-empty string"),
        ({"top_k": 0}, "top_k must be >= 1, got 0"),
        ({"top_k": 65}, "top_k must be <= 64, got 65"),
        ({"candidates": True}, "candidates must be an integer, got True"),
        ({"mood_valence": 2.0}, "mood_valence must be within [-1, 1], got 2.0"),
        ({"now": "2026-06-01T12:00:00"}, "now must carry a UTC offset"),
        ({"where": "agent_id=pets"}, "where must be a mapping"),
    ],
)
def test_bad_retriever_settings_name_the_field(
    memory: ChromaMemory, options: dict[str, Any], expected: str
) -> None:
    settings: dict[str, Any] = {"user_id": "alice", **options}
    user_id = settings.pop("user_id")
    with pytest.raises(InvalidInputError, match=r"^AffectMemoryLlamaRetriever ") as raised:
        AffectMemoryLlamaRetriever(memory, user_id, **settings)
    assert expected in str(raised.value)


# ------------------------------------------------------------------------------ postprocessor


def _node(node_id: str, score: float | None, **metadata: Any) -> NodeWithScore:
    return NodeWithScore(
        node=TextNode(id_=node_id, text=f"text of {node_id}", metadata=metadata), score=score
    )


NODES = [
    ("stale-close", 0.62, {"timestamp": "2025-06-01T12:00:00Z", "significance": 0.2}),
    (
        "fresh-sad",
        0.58,
        {"timestamp": "2026-05-31T12:00:00+02:00", "emotional_valence": -0.9, "recall_count": 4},
    ),
    ("episode", 0.40, {"timestamp": "2020-01-01T00:00:00Z", "episode": True}),
    ("bare", 0.60, {}),
    ("naive-time", 0.55, {"timestamp": "2026-05-31T12:00:00", "significance": 1.0}),
]


def _reference(mood: float = 0.0, limit: int = 10) -> list[tuple[str, float]]:
    candidates = []
    for node_id, cosine, metadata in NODES:
        features = {key: value for key, value in metadata.items() if key != "timestamp"}
        stamp = metadata.get("timestamp")
        zoned = stamp if stamp and datetime.fromisoformat(stamp).tzinfo is not None else None
        candidates.append(
            MemoryCandidate(id=node_id, text="", distance=1.0 - cosine, timestamp=zoned, **features)
        )
    ranked = rank_candidates_reference(candidates, NOW, mood, limit, weights=RECALL_WEIGHTS)
    return [(scored.candidate.id, scored.score) for scored in ranked]


def test_the_postprocessor_scores_as_the_kernels_scalar_reference() -> None:
    nodes = [_node(node_id, cosine, **metadata) for node_id, cosine, metadata in NODES]
    postprocessor = AffectRankingPostprocessor(now=NOW, mood_valence=-0.6)
    assert isinstance(postprocessor, BaseNodePostprocessor)
    ranked = postprocessor.postprocess_nodes(nodes, query_str="anything")
    got = [(item.node.node_id, item.score) for item in ranked]
    expected = _reference(mood=-0.6)
    assert [node_id for node_id, _ in got] == [node_id for node_id, _ in expected]
    for (_, score), (_, reference) in zip(got, expected, strict=True):
        assert score == pytest.approx(reference, abs=1e-12)
    assert got[0][0] == "fresh-sad", "fresh, recalled and mood-congruent beats a closer stale one"
    assert [item.node for item in ranked[:1]] == [nodes[1].node], "the node itself is kept"
    assert [item.score for item in nodes] == [cosine for _, cosine, _ in NODES], "inputs intact"


def test_nodes_without_features_keep_their_similarity_order_at_neutral_weight() -> None:
    cosines = {"a": 0.3, "b": 0.9, "c": -0.2, "d": 0.5}
    nodes = [_node(node_id, cosine) for node_id, cosine in cosines.items()]
    ranked = AffectRankingPostprocessor(now=NOW).postprocess_nodes(nodes)
    assert _ids(ranked) == ["b", "d", "a", "c"]
    neutral = RECALL_WEIGHTS.recency_fallback * (1 + RECALL_WEIGHTS.significance_weight * 0.5)
    for item in ranked:
        similarity = (1 + cosines[item.node.node_id]) / 2
        assert item.score == pytest.approx(similarity * neutral, abs=1e-12)


def test_top_n_weights_and_duplicate_ids() -> None:
    nodes = [_node(node_id, cosine, **metadata) for node_id, cosine, metadata in NODES]
    top = AffectRankingPostprocessor(now=NOW, top_n=2).postprocess_nodes(nodes)
    expected = _reference(limit=2)
    assert _ids(top) == [node_id for node_id, _ in expected]
    assert [i.score for i in top] == pytest.approx([score for _, score in expected], abs=1e-12)
    kernel = AffectRankingPostprocessor(now=NOW, weights=DEFAULT_RETRIEVAL_WEIGHTS)
    assert kernel.postprocess_nodes(nodes) != AffectRankingPostprocessor(now=NOW).postprocess_nodes(
        nodes
    ), "the weights are the postprocessor's own setting"
    twice = [_node("x", 0.2), _node("x", 0.8)]
    [best] = AffectRankingPostprocessor(now=NOW).postprocess_nodes(twice)
    assert best.node is twice[1].node, "nodes sharing an id keep their best"
    assert AffectRankingPostprocessor(now=NOW).postprocess_nodes([]) == []


def test_a_node_without_a_score_is_compared_by_embedding() -> None:
    query = QueryBundle("q", embedding=[1.0, 0.0])
    near = NodeWithScore(node=TextNode(id_="near", text="n", embedding=[0.8, 0.6]))
    far = NodeWithScore(node=TextNode(id_="far", text="f", embedding=[0.0, 1.0]))
    none = NodeWithScore(node=TextNode(id_="none", text="z"))
    ranked = AffectRankingPostprocessor(now=NOW).postprocess_nodes([far, none, near], query)
    assert _ids(ranked) == ["near", "far", "none"], "far and none tie: ids break it"
    by_id = {item.node.node_id: item.score for item in ranked}
    assert by_id["far"] == pytest.approx(by_id["none"]), "orthogonal is the neutral similarity"
    assert by_id["near"] > by_id["far"]


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (_node("bm25", 7.3), "node 'bm25' has score 7.3"),
        (_node("nan", float("nan")), "node 'nan' has score nan"),
        (_node("sig", 0.5, significance=2), "node 'sig' metadata significance must be within"),
        (_node("sig", 0.5, significance="high"), "metadata significance must be a number"),
        (_node("rc", 0.5, recall_count=1.5), "metadata recall_count must be an integer"),
        (_node("ep", 0.5, episode="yes"), "metadata episode must be a bool, got 'yes'"),
        (_node("val", 0.5, emotional_valence=-3), "emotional_valence must be within [-1, 1]"),
    ],
)
def test_bad_scores_and_features_are_refused_naming_the_node(
    node: NodeWithScore, expected: str
) -> None:
    with pytest.raises(InvalidInputError, match=r"^AffectRankingPostprocessor ") as raised:
        AffectRankingPostprocessor(now=NOW).postprocess_nodes([node])
    assert expected in str(raised.value)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"mood_valence": 1.5}, "mood_valence must be within [-1, 1], got 1.5"),
        ({"top_n": 0}, "top_n must be >= 1, got 0"),
        ({"congruence_on": 1}, "congruence_on"),
        ({"now": "2026-06-01T12:00:00"}, "now must carry a UTC offset"),
        (
            {"top_k": 3},
            "top_k is not a known setting (mood_valence, now, top_n, congruence_on, weights), "
            "got 3",
        ),
    ],
)
def test_bad_postprocessor_settings_name_the_field(options: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidInputError, match=r"^AffectRankingPostprocessor ") as raised:
        AffectRankingPostprocessor(**options)
    assert expected in str(raised.value)


class _Embedding(BaseEmbedding):
    """LlamaIndex's embedding interface over the test session's model."""

    def __init__(self, embedder: Embedder) -> None:
        super().__init__(model_name=embedder.name)
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_query(query)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_documents([text])[0]]


def test_the_postprocessor_reranks_llamaindexs_own_vector_retriever(embedder: Embedder) -> None:
    nodes = [
        TextNode(id_=record["id"], text=record["text"], metadata=dict(record))
        for record in RECORDS
        if record["user_id"] == "alice"
    ]
    index = VectorStoreIndex(nodes, embed_model=_Embedding(embedder))
    found = index.as_retriever(similarity_top_k=3).retrieve("tell me about my pets")
    assert len(found) == 3 and all(item.score is not None for item in found)
    sad = AffectRankingPostprocessor(now=NOW, mood_valence=-1.0)
    ranked = sad.postprocess_nodes(found, query_str="tell me about my pets")
    assert sorted(_ids(ranked)) == sorted(_ids(found))
    scores = [item.score for item in ranked]
    assert scores == sorted(scores, reverse=True)
    candidates = [
        MemoryCandidate(
            id=item.node.node_id,
            text="",
            distance=1.0 - float(item.score or 0.0),
            timestamp=item.node.metadata["timestamp"],
            significance=item.node.metadata.get("significance", 0.5),
            episode=item.node.metadata.get("episode", False),
            emotional_valence=item.node.metadata.get("emotional_valence", 0.0),
        )
        for item in found
    ]
    reference = rank_candidates_reference(candidates, NOW, -1.0, 3, weights=RECALL_WEIGHTS)
    assert _ids(ranked) == [scored.candidate.id for scored in reference]
