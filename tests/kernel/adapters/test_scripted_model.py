"""The scripted model and static retriever play back exactly what they were given."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from affect_memory.kernel import AffectState, DecodingParams, EmotionMap, MemoryCandidate
from affect_memory.kernel.adapters import ScriptedModel, ScriptedReply, StaticRetriever
from affect_memory.kernel.protocols import (
    GateInput,
    GateResult,
    GenerateInput,
    MemoryRetriever,
    ModelAdapter,
    RetrievalInput,
)
from affect_memory.kernel.ranking import rank_candidates

STATE = AffectState()


def gate_input(message: str = "hi") -> GateInput:
    return GateInput(message=message, state=STATE)


def generate_input(message: str = "hi") -> GenerateInput:
    return GenerateInput(
        message=message,
        system_prompt="be kind",
        state=STATE,
        intent="CASUAL",
        emotions=EmotionMap(),
        decoding=DecodingParams(temperature=1.0, top_p=None),
    )


async def collect(model: ScriptedModel, message: str = "hi") -> list[object]:
    return [chunk async for chunk in model.generate(generate_input(message))]


def test_the_adapters_satisfy_their_protocols() -> None:
    assert isinstance(ScriptedModel(), ModelAdapter)
    assert isinstance(StaticRetriever(), MemoryRetriever)


async def test_gate_results_are_played_in_order_then_the_default() -> None:
    model = ScriptedModel(gates=[GateResult(intent="ABUSE")])
    model.queue_gate(GateResult(intent="APOLOGY"))
    intents = [(await model.gate(gate_input(str(n)))).intent for n in range(3)]
    assert intents == ["ABUSE", "APOLOGY", "CASUAL"]
    assert [request.message for request in model.gate_requests] == ["0", "1", "2"]


async def test_classify_and_respond_decide_once_the_queues_are_empty() -> None:
    model = ScriptedModel(
        classify=lambda request: GateResult(intent=request.message.upper()),
        respond=lambda request: ["echo ", request.message],
    )
    assert (await model.gate(gate_input("neglect"))).intent == "NEGLECT"
    assert await collect(model, "ping") == ["echo ", "ping"]


async def test_without_defaults_an_empty_queue_is_an_error() -> None:
    model = ScriptedModel(default_gate=None, default_reply=None)
    with pytest.raises(LookupError, match="gate"):
        await model.gate(gate_input())
    with pytest.raises(LookupError, match="reply"):
        model.generate(generate_input())


async def test_queued_errors_are_raised_at_their_step() -> None:
    model = ScriptedModel(gates=[ConnectionError("gate")], replies=[TimeoutError("before")])
    with pytest.raises(ConnectionError):
        await model.gate(gate_input())
    stream = model.generate(generate_input())
    assert len(model.generate_requests) == 1  # logged before the first chunk
    with pytest.raises(TimeoutError):
        await anext(stream)


async def test_an_error_mid_stream_follows_the_chunks_before_it() -> None:
    model = ScriptedModel(
        replies=[ScriptedReply(chunks=("a", "b", "c"), error=OSError("cut"), error_after=2)]
    )
    seen: list[object] = []
    with pytest.raises(OSError, match="cut"):
        async for chunk in model.generate(generate_input()):
            seen.append(chunk)
    assert seen == ["a", "b"]


async def test_a_paused_reply_waits_and_reports_that_it_started() -> None:
    pause, started, first = asyncio.Event(), asyncio.Event(), asyncio.Event()
    model = ScriptedModel(replies=[ScriptedReply(chunks=("a", "b"), pause=pause, started=started)])
    seen: list[object] = []

    async def consume() -> list[object]:
        async for chunk in model.generate(generate_input()):
            seen.append(chunk)
            first.set()
        return seen

    task = asyncio.create_task(consume())
    await started.wait()
    await first.wait()  # the consumer went straight back for "b", which waits for the pause
    assert seen == ["a"] and not task.done()
    pause.set()
    assert await task == ["a", "b"]


async def test_malformed_entries_are_returned_as_given() -> None:
    model = ScriptedModel(gates=[{"intent": "CASUAL"}], replies=[["ok", 3]])
    assert await model.gate(gate_input()) == {"intent": "CASUAL"}
    assert await collect(model) == ["ok", 3]


async def test_the_static_retriever_returns_its_candidates_and_logs_requests() -> None:
    candidates = [
        MemoryCandidate(id="m1", text="", distance=0.1),
        MemoryCandidate(id="m2", text="", distance=0.4),
    ]
    retriever = StaticRetriever(candidates)
    request = RetrievalInput(query="q", state=STATE, limit=5, now=datetime.now(UTC))
    found = await retriever.retrieve(request)
    assert list(found) == candidates and retriever.requests == [request]
    assert rank_candidates(found, request.now)[0].candidate.id == "m1"
    retriever.error = ConnectionRefusedError("down")
    with pytest.raises(ConnectionRefusedError):
        await retriever.retrieve(request)
    assert len(retriever.requests) == 2
