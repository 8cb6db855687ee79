"""``arecall``, ``aadd`` and ``aforget``: the sync results, in the store's own worker thread, with
the event loop running on meanwhile (embedded, in-process and over ``chroma run``)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import uuid
from collections.abc import Awaitable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from affect_memory.errors import StoreError, StoreUnavailableError
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import DelegatingEmbedder, SentenceTransformerEmbedder
from tests.contracts.memory_contract import REFERENCE, record

_T = TypeVar("_T")


class ThreadNoting(DelegatingEmbedder):
    """The real embedder, noting the name of each thread it is called in."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        super().__init__(inner)
        self.threads: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed with the real model, noting the thread."""
        self.threads.append(threading.current_thread().name)
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query with the real model, noting the thread."""
        self.threads.append(threading.current_thread().name)
        return self._inner.embed_query(text)


@pytest.fixture(params=["embedded", "in-memory", "server"])
def make(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> Iterator[Any]:
    """A factory of memories at one kind of location, closed after the test."""
    opened: list[ChromaMemory] = []
    prefix = f"async-{uuid.uuid4().hex[:10]}"
    if request.param == "embedded":
        location: str | Path = tmp_path / "chroma"
    elif request.param == "in-memory":
        location = ":memory:"
    else:
        location = request.getfixturevalue("chroma_server")

    def factory(**options: Any) -> ChromaMemory:
        options.setdefault("embedder", embedder)
        memory = ChromaMemory(location, collection=prefix, **options)
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        memory.close()


async def _ticking_while(work: Awaitable[_T]) -> tuple[_T | BaseException, int]:
    """Await ``work`` while a 5 ms ticker runs on the same loop: the outcome, and how many
    ticks happened before it was done (a blocked loop gives none)."""
    task = asyncio.ensure_future(work)
    ticks = 0
    while not task.done():
        await asyncio.sleep(0.005)
        ticks += not task.done()
    try:
        return task.result(), ticks
    except BaseException as error:  # the caller checks which error
        return error, ticks


def test_the_async_calls_give_what_the_sync_ones_give(make: Any) -> None:
    memory = make()

    async def scenario() -> None:
        tea, bike = "I drink green tea every morning.", "I ride my bike to work."
        report = await memory.aadd(
            [record("m1", tea, user="ann"), record("m1", bike, user="bob"),
             record("m2", "I moved to Oslo last spring.", user="ann", days=40)]
        )  # fmt: skip
        assert report.written == 3
        assert (await memory.aadd([record("m1", "again", user="ann")])).skipped == ("m1",)
        for query, user in (("What do I drink?", "ann"), ("How do I travel?", "bob")):
            got = await memory.arecall(query, user, now=REFERENCE, top_k=2)
            want = memory.recall(query, user, now=REFERENCE, top_k=2)
            assert [hit.id for hit in got.results] == [hit.id for hit in want.results]
            assert [hit.score for hit in got.results] == pytest.approx(
                [hit.score for hit in want.results], abs=1e-9
            )
        # The same id under two users stays two memories through the async calls too.
        assert await memory.aforget(["m1", "nope"], user_id="ann") == ("m1",)
        assert [r.text for r in memory.get(["m1"], user_id="bob")] == [bike]
        assert memory.get(["m1"], user_id="ann") == () and memory.count() == 2
        hits = (await memory.arecall("How do I travel?", "bob", now=REFERENCE)).results
        assert [hit.id for hit in hits] == ["m1"]

    asyncio.run(scenario())


def test_bad_input_to_an_async_call_is_refused_as_the_sync_call_refuses_it(make: Any) -> None:
    from affect_memory.errors import RecordError
    from affect_memory.kernel import InvalidInputError

    memory = make()

    async def scenario() -> None:
        with pytest.raises(InvalidInputError, match="user_id"):
            await memory.arecall("tea", "")
        with pytest.raises(RecordError):
            await memory.aadd([record("m1", "fine"), {"id": "m2"}])
        with pytest.raises(InvalidInputError, match="not one string"):
            await memory.aforget("m1", user_id="ann")
        assert memory.count() == 0

    asyncio.run(scenario())


def test_every_async_call_of_a_store_runs_in_that_stores_one_thread(
    make: Any, embedder: SentenceTransformerEmbedder
) -> None:
    noted = ThreadNoting(embedder)
    first, second = make(embedder=noted), make(embedder=noted)

    async def scenario() -> None:
        await first.aadd([record("m1", "I keep bees.")])
        await asyncio.gather(*(first.arecall("bees", "ann") for _ in range(4)))
        await second.arecall("bees", "ann")

    asyncio.run(scenario())
    # each store embeds its writes, its queries and, for its first question about the
    # present ("bees" asks about no one in particular), the life topics once
    assert len(noted.threads) == 8
    assert len(set(noted.threads[:6])) == 1 and noted.threads[0].startswith("affect-memory store-")
    assert set(noted.threads[6:]) == {noted.threads[6]} != {noted.threads[0]}
    assert noted.threads[6].startswith("affect-memory")
    assert threading.current_thread().name not in noted.threads


def test_the_loop_keeps_running_while_the_model_embeds_a_batch(make: Any) -> None:
    memory = make()
    batch = [record(f"m{i}", f"note {i}: the tomatoes need water on day {i}") for i in range(300)]

    async def scenario() -> tuple[Any, int]:
        return await _ticking_while(memory.aadd(batch))

    outcome, ticks = asyncio.run(scenario())
    assert not isinstance(outcome, BaseException) and outcome.written == 300
    # Called on the loop itself, the same add would have let the ticker run 0 times.
    assert ticks >= 10, ticks


def test_the_loop_keeps_running_while_a_stopped_server_times_out(
    own_chroma_server: tuple[str, int], embedder: SentenceTransformerEmbedder
) -> None:
    # own_chroma_server is a server this test started, on a port its PID was seen holding, so
    # SIGSTOP stops the server this memory talks to. Only the call under test has a short
    # timeout; writing first and reading after use a generous one, so a loaded machine cannot
    # time them out (the test once failed at load 7).
    url, pid = own_chroma_server
    with (
        ChromaMemory(url, embedder=embedder, timeout=60.0) as patient,
        ChromaMemory(url, embedder=embedder, timeout=2.0) as memory,
    ):
        patient.add([record("m1", "I keep bees.")])
        os.kill(pid, signal.SIGSTOP)  # as if the server hung
        try:

            async def scenario() -> tuple[Any, int]:
                return await _ticking_while(memory.arecall("bees", "ann"))

            outcome, ticks = asyncio.run(scenario())
        finally:
            os.kill(pid, signal.SIGCONT)
        assert isinstance(outcome, StoreUnavailableError), outcome
        assert "did not answer within 2 s" in str(outcome)
        # A stopped server cannot answer, so the call is pending until its timeout: any tick
        # while it was pending shows the loop ran (a call on the loop itself allows none).
        # About 400 happen in the 2 s; the bound does not depend on the machine's speed.
        assert ticks >= 1, ticks
        hits = asyncio.run(patient.arecall("bees", "ann", now=REFERENCE)).results
        assert [hit.id for hit in hits] == ["m1"]


def test_close_lets_handed_over_calls_finish_and_refuses_later_ones(make: Any) -> None:
    memory = make()

    async def scenario() -> None:
        pending = asyncio.ensure_future(memory.aadd([record("m1", "I keep bees.")]))
        await asyncio.sleep(0)  # handed to the worker thread
        memory.close()
        assert (await pending).written == 1
        with pytest.raises(StoreError, match="closed"):
            await memory.arecall("bees", "ann")

    asyncio.run(scenario())
