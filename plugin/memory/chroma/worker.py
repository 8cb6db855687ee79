"""One worker thread per store, where a ``ChromaMemory``'s async methods do their blocking work.

``arecall``, ``aadd`` and ``aforget`` hand the synchronous call to the store's own thread and
await it, so the event loop keeps running other tasks meanwhile: the thread blocks in
embedding (ONNX Runtime and torch release the GIL), in HTTP to a Chroma server and in an
embedded store's reads (chromadb's Rust bindings release the GIL while they search). One
thread per store, rather than ``asyncio.to_thread`` per call, keeps a store's calls in the
order they were made and off the loop's shared default executor, which other libraries fill.

Why not chromadb's ``AsyncHttpClient`` for a server: it decodes every JSON reply on the event
loop (measured on 1.5.9: 50 gathered queries were no faster than 50 sequential ones, and a
10 ms ticker on the same loop ran 23 of 43 times meanwhile), and the write path's undo and the
memory index's journal would have to be written twice. What still holds the loop: an
*embedded* write, because chromadb's Rust bindings keep the GIL while they add, upsert,
update or delete (about a second per 1,000 new records); a server store does not.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import TypeVar

from affect_memory.errors import StoreError

__all__ = ["StoreWorker"]

_T = TypeVar("_T")

_NUMBERS = count(1)


class StoreWorker:
    """A lazily started thread that runs one store's blocking calls in order."""

    def __init__(self, name: str) -> None:
        """``name`` labels the thread (``affect-memory store-N NAME_0``, N unique per process)."""
        self._name = f"store-{next(_NUMBERS)} {name}"
        self._executor: ThreadPoolExecutor | None = None
        self._guard = threading.Lock()
        self._closed = False

    @property
    def thread_name_prefix(self) -> str:
        """The prefix of the worker thread's name (the thread is ``<prefix>_0``)."""
        return f"affect-memory {self._name}"

    async def run(self, call: Callable[[], _T]) -> _T:
        """Run ``call`` in the store's thread and wait for it without blocking the loop.

        Cancelling the awaiting task does not stop a call already running: it finishes (a
        write completes or undoes itself) and its result is dropped.
        """
        with self._guard:
            if self._closed:
                raise StoreError("cannot run an async call: this ChromaMemory is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.thread_name_prefix)
            future = self._executor.submit(call)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Let calls already handed over finish, then stop the thread; safe to call twice."""
        with self._guard:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
