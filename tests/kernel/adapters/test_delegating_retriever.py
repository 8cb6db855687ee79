"""A wrapped retriever ranks as the retriever it wraps; a wrapper that hides it is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from affect_memory.kernel import AffectEngine, GateResult, InvalidInputError, MemoryCandidate
from affect_memory.kernel.adapters import (
    DelegatingRetriever,
    InMemoryStateStore,
    ScriptedModel,
    StaticRetriever,
)
from affect_memory.kernel.protocols import MemoryRetriever, RankedRetriever, RetrievalInput
from affect_memory.kernel.ranking import rank_candidates
from affect_memory.kernel.retrieval import RetrievalWeights, ScoredCandidate

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _candidate(ident: str, distance: float, *, episode: bool = False) -> MemoryCandidate:
    return MemoryCandidate(
        id=ident,
        text=f"memory {ident}",
        distance=distance,
        timestamp="2026-02-20T12:00:00+00:00",
        episode=episode,
    )


POOL = (_candidate("near", 0.1), _candidate("episode", 0.5, episode=True))
WEIGHTS = RetrievalWeights(episode_bonus=0.5)  # ranks "episode" first; the defaults rank "near"


class Weighted(StaticRetriever):
    """Candidates prepared for weights of its own, as a store's retriever offers them."""

    ranking_weights = WEIGHTS


class Ranking:
    """A retriever that ranks its own memories (and can also hand them over unranked)."""

    ranking_weights = WEIGHTS

    def __init__(self) -> None:
        self.ranked_calls = 0

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        return POOL

    async def retrieve_ranked(self, request: RetrievalInput) -> Sequence[ScoredCandidate]:
        self.ranked_calls += 1
        return rank_candidates(POOL, request.now, limit=request.limit, weights=WEIGHTS)


class Recording(DelegatingRetriever):
    """A wrapper that observes ``retrieve`` only, as a demo or a logger would."""

    def __init__(self, wrapped: object) -> None:
        super().__init__(wrapped)
        self.seen: list[str] = []

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        self.seen.append(request.query)
        found: Sequence[MemoryCandidate] = await self.wrapped.retrieve(request)
        return found


def _turn(retriever: object) -> tuple[AffectEngine, list[str]]:
    engine = AffectEngine(
        model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
        store=InMemoryStateStore(),
        conversation_id="c",
        retriever=retriever,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    result = asyncio.run(engine.turn("remember?"))
    return engine, [scored.candidate.id for scored in result.memories]


def test_a_wrapper_ranks_with_the_weights_of_the_retriever_it_wraps() -> None:
    wrapper = Recording(Weighted(POOL))
    engine, order = _turn(wrapper)
    assert engine.weights == WEIGHTS
    assert order == ["episode", "near"]
    assert wrapper.seen == ["remember?"]
    assert not isinstance(wrapper, RankedRetriever)  # wrapping a plain retriever stays plain


def test_a_wrapper_of_a_ranked_retriever_takes_its_ranking_as_it_is() -> None:
    inner = Ranking()
    wrapper = Recording(inner)
    assert isinstance(wrapper, RankedRetriever) and isinstance(wrapper, MemoryRetriever)
    _, order = _turn(wrapper)
    assert order == ["episode", "near"]
    assert inner.ranked_calls == 1 and wrapper.seen == []  # the ranked path, through the wrapper


def test_a_wrapper_cannot_override_a_method_the_wrapped_retriever_lacks() -> None:
    class RanksAnyway(DelegatingRetriever):
        async def retrieve_ranked(self, request: RetrievalInput) -> Sequence[ScoredCandidate]:
            return ()

    with pytest.raises(InvalidInputError, match="overrides retrieve_ranked but the retriever"):
        RanksAnyway(StaticRetriever(POOL))


class Hiding:
    """A hand-written wrapper that names what it wraps but forwards only ``retrieve``."""

    def __init__(self, wrapped: MemoryRetriever) -> None:
        self.__wrapped__ = wrapped

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        return await self.__wrapped__.retrieve(request)


@pytest.mark.parametrize(
    ("inner", "hidden"),
    [(Weighted(POOL), "ranking_weights"), (Ranking(), "retrieve_ranked and ranking_weights")],
)
def test_the_engine_refuses_a_wrapper_that_hides_the_wrapped_ranking(
    inner: MemoryRetriever, hidden: str
) -> None:
    with pytest.raises(InvalidInputError, match=f"hides its {hidden}, so turns would rank"):
        _turn(Hiding(inner))
