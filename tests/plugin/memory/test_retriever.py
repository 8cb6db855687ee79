"""One user's memories as the engine's retriever: a turn takes recall's ranking as it is."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from affect_memory.kernel import AffectEngine, GateResult
from affect_memory.kernel.adapters import InMemoryStateStore, ScriptedModel
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.protocols import MemoryRetriever, RankedRetriever, RetrievalInput
from affect_memory.kernel.retrieval import ScoredCandidate
from affect_memory.memory.settings import RecallSettings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.contracts.memory_contract import sample_records

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class CandidatesOnly:
    """A retriever that hands the engine candidates to rank (``retrieve`` alone)."""

    def __init__(self, inner: MemoryRetriever) -> None:
        self._inner = inner
        self.ranking_weights = getattr(inner, "ranking_weights", None)

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        return await self._inner.retrieve(request)


def _turn(retriever: object, query: str) -> tuple[list[tuple[str, float]], list[str]]:
    stages: list[str] = []
    engine = AffectEngine(
        model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
        store=InMemoryStateStore(),
        conversation_id="c",
        retriever=retriever,  # type: ignore[arg-type]
        clock=lambda: NOW,
        observer=lambda stage, _seconds: stages.append(stage),
    )
    turn = asyncio.run(engine.turn(query))
    return [(m.candidate.id, m.score) for m in turn.memories], stages


@pytest.mark.parametrize(
    "query", ["Where do I live?", "What did I do last week?", "alice job", "Who is Carmen?"]
)
def test_a_turn_surfaces_recall_s_ranking_as_it_is_without_ranking_again(
    query: str, tmp_path: Path, embedder: Embedder
) -> None:
    settings = RecallSettings(topic_weight=0.2)  # any settings: the turn follows them
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(sample_records())
        retriever = memory.retriever_for("alice", settings=settings)
        assert isinstance(retriever, RankedRetriever)
        ranked, stages = _turn(retriever, query)
        expected = memory.recall(query, "alice", now=NOW, top_k=6, settings=settings).results
        assert [ident for ident, _ in ranked] == [hit.id for hit in expected]
        assert [score for _, score in ranked] == [hit.score for hit in expected]
        assert "retrieve" in stages and "rank" not in stages
        # a retriever that only hands over candidates is ranked by the kernel, to the same order
        reranked, stages = _turn(CandidatesOnly(retriever), query)
        assert [ident for ident, _ in reranked] == [ident for ident, _ in ranked]
        assert [score for _, score in reranked] == pytest.approx(
            [score for _, score in ranked], abs=1e-12
        )
        assert "rank" in stages


class RankedOnly:
    """A retriever that only ranks (``retrieve_ranked``), as a store of one's own might."""

    def __init__(self, inner: RankedRetriever) -> None:
        self._inner = inner

    async def retrieve_ranked(self, request: RetrievalInput) -> Sequence[ScoredCandidate]:
        return await self._inner.retrieve_ranked(request)


def test_a_retriever_that_only_ranks_is_accepted_and_asked_for_the_limit_it_needs(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(sample_records())
        inner = memory.retriever_for("alice")
        asked: list[int] = []

        class Noting(RankedOnly):
            async def retrieve_ranked(self, request: RetrievalInput) -> Sequence[ScoredCandidate]:
                asked.append(request.limit)
                return await super().retrieve_ranked(request)

        ranked, stages = _turn(Noting(inner), "Where do I live?")
        expected = memory.recall("Where do I live?", "alice", now=NOW, top_k=6).results
        assert [ident for ident, _ in ranked] == [hit.id for hit in expected]
        assert asked == [6] and "rank" not in stages  # the turn's limit; no history yet


def test_a_store_refuses_an_analyser_without_the_methods_it_calls(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="analyser must provide plan and form_terms"):
        ChromaMemory(tmp_path / "chroma", analyser=object())  # type: ignore[arg-type]


def test_a_message_longer_than_a_query_is_searched_by_its_opening(
    tmp_path: Path, embedder: Embedder
) -> None:
    opening = "Where do I live?"
    message = opening + " " + "and then some more words of a long story. " * 200
    assert len(message) > 4096  # longer than a query, shorter than the engine's limit
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(sample_records())
        ranked, _ = _turn(memory.retriever_for("alice"), message)
        expected = memory.recall(message[:4096], "alice", now=NOW, top_k=6).results
        assert ranked and [ident for ident, _ in ranked] == [hit.id for hit in expected]
