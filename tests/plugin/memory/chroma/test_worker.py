"""One store's blocking calls run in its own thread, one at a time in the order made, off the
event loop; closing lets the calls already handed over finish and refuses any later one."""

from __future__ import annotations

import asyncio
import threading

import pytest

from affect_memory.errors import StoreError
from affect_memory.memory.chroma.worker import StoreWorker


def _threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


async def test_calls_run_in_order_in_one_named_thread_started_on_first_use() -> None:
    worker = StoreWorker("/tmp/store")
    assert worker.thread_name_prefix.startswith("affect-memory store-")
    assert worker.thread_name_prefix.endswith(" /tmp/store")
    assert _threads(worker.thread_name_prefix) == []  # nothing started yet
    release = threading.Event()
    seen: list[tuple[int, str]] = []

    def call(n: int) -> int:
        if n == 0:
            assert release.wait(30)
        seen.append((n, threading.current_thread().name))
        return n * n

    try:
        pending = [asyncio.ensure_future(worker.run(lambda n=n: call(n))) for n in range(5)]
        await asyncio.sleep(0)  # the loop is free while the first call blocks its thread
        assert not any(task.done() for task in pending)
        release.set()
        assert await asyncio.gather(*pending) == [0, 1, 4, 9, 16]
        assert [n for n, _ in seen] == [0, 1, 2, 3, 4]
        assert {name.rsplit("_", 1)[0] for _, name in seen} == {worker.thread_name_prefix}
    finally:
        worker.close()
    assert _threads(worker.thread_name_prefix) == []


async def test_a_cancelled_wait_does_not_stop_the_running_call() -> None:
    worker = StoreWorker("store")
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def write() -> str:
        started.set()
        assert release.wait(30)
        finished.set()
        return "written"

    waiting = asyncio.ensure_future(worker.run(write))
    assert await asyncio.to_thread(started.wait, 30)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    worker.close()  # waits for the call handed over
    assert finished.is_set()


async def test_close_finishes_what_was_handed_over_and_refuses_what_comes_after() -> None:
    worker = StoreWorker("store")
    release = threading.Event()
    handed = asyncio.ensure_future(worker.run(lambda: release.wait(30)))
    await asyncio.sleep(0)  # handed to the thread
    closing = asyncio.ensure_future(asyncio.to_thread(worker.close))
    release.set()
    await closing
    assert await handed is True
    with pytest.raises(StoreError, match="this ChromaMemory is closed"):
        await worker.run(lambda: None)
    worker.close()  # twice is fine
