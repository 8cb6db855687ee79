"""Seeing a turn of a SQLite store wait for a conversation another turn holds, without sleeping.

A turn first tries the conversation's lock file without blocking; only when that fails does it
start a thread that blocks on the lock. That thread's start is the moment watched here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable

from affect_memory import SQLiteStateStore
from affect_memory.kernel.protocols import StateStore

__all__ = ["watch_waits"]


def watch_waits(store: StateStore, conversation: str) -> Awaitable[None]:
    """Done once a turn of the SQLite ``store`` finds ``conversation`` held and waits for it.

    Call it on the event loop, before the turn starts.
    """
    assert isinstance(store, SQLiteStateStore)
    locks = store._locks
    path = locks.path_for(conversation)
    loop = asyncio.get_running_loop()
    waiting = asyncio.Event()
    start_waiter = locks._waiter

    def waiter(at: str) -> concurrent.futures.Future[int]:
        if at == path:
            loop.call_soon_threadsafe(waiting.set)
        return start_waiter(at)

    locks._waiter = waiter  # type: ignore[method-assign]
    return waiting.wait()
