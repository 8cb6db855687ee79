"""What every request handler shares: the memory store, the state store, the model and the timeout.

Store calls block (embedding, Chroma, SQLite), so ``ServerContext.call`` runs each in a thread of
the server's own pool and waits at most ``timeout`` seconds: a slower call answers 504 while the
thread finishes (or undoes) its work in the background, and the event loop stays free, so
requests for different users run side by side.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar

from affect_memory.http.problems import ProblemError
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.chroma.location import DEFAULT_TIMEOUT
from affect_memory.memory.store import ChromaMemory

__all__ = ["DEFAULT_CALL_TIMEOUT", "DEFAULT_WORKERS", "ModelChoice", "ServerContext"]

DEFAULT_CALL_TIMEOUT = DEFAULT_TIMEOUT
"""Seconds a store call may take before the request answers 504 (``--timeout``): the store's
own bound on one Chroma server request."""

DEFAULT_WORKERS = 8
"""Threads that run store calls: how many requests may be inside the store at once."""

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True)
class ModelChoice:
    """Which model answers conversation turns: ``scripted`` (a fixed reply) or ``openai``
    (an OpenAI-compatible endpoint at ``url`` serving ``name``, with ``api_key`` if set)."""

    kind: Literal["scripted", "openai"] = "scripted"
    url: str | None = None
    name: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def build(self, gate: Any) -> Any:
        """A new model adapter of this choice, classifying with ``gate`` (the embedding intent
        gate): scripted replies, or the endpoint's (an async context manager for ``openai``)."""
        if self.kind == "scripted":
            from affect_memory.gate.scripted import GatedScriptedModel

            return GatedScriptedModel(gate)
        from affect_memory.models.openai_adapter import OpenAICompatibleModel

        if self.url is None or self.name is None:
            raise InvalidInputError("--model openai needs --model-url and --model-name")
        return OpenAICompatibleModel(self.url, self.name, self.api_key, gate=gate)


class ServerContext:
    """The server's shared resources: ``memory``, the state store at ``state_url`` (errors
    name ``state_source``), the ``model`` choice and the per-call ``timeout`` in seconds."""

    def __init__(
        self,
        memory: ChromaMemory,
        *,
        state_url: str,
        state_source: str = "--state",
        timeout: float = DEFAULT_CALL_TIMEOUT,
        model: ModelChoice | None = None,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        """Check ``timeout`` (positive, finite) and ``workers``; the state store opens on first
        use, so a server that never serves a conversation never creates one."""
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise InvalidInputError(f"--timeout must be a positive number, got {shown(timeout)}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidInputError(f"workers must be a positive integer, got {shown(workers)}")
        self.memory = memory
        self.state_url = state_url
        self.state_source = state_source
        self.timeout = float(timeout)
        self.model = model if model is not None else ModelChoice()
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="affect-memory http")
        self._state: Any = None
        self._state_guard = threading.Lock()
        self._gate: Any = None

    def state_store(self) -> Any:
        """The state store (SQLite or PostgreSQL), opened once on first use; blocking."""
        with self._state_guard:
            if self._state is None:
                from affect_memory.state.location import open_state_store

                self._state = open_state_store(self.state_url, source=self.state_source)
            return self._state

    async def replay_pending(self) -> Any:
        """Apply the memory writes committed turns still owe (a crash or an outage left them
        in the state store's outbox), oldest first, each once, as ``chat`` does on start; the
        ``ReplayReport``."""
        from affect_memory.memory.turns.effects import MemoryTurnEffects

        store = await self.call(self.state_store)
        return await MemoryTurnEffects(self.memory).replay_pending(store)

    def intent_gate(self) -> Any:
        """The embedding intent gate every turn classifies with, built once on the memory's
        embedder (its exemplars embed on first use); blocking."""
        with self._state_guard:
            if self._gate is None:
                from affect_memory.gate.classifier import EmbeddingIntentGate

                self._gate = EmbeddingIntentGate(self.memory.embedder)
            return self._gate

    async def call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` in a worker thread; ``ProblemError(504)`` after ``timeout``.

        The thread of a call that timed out is not stopped (a store write completes or undoes
        itself); its result is dropped.
        """
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            raise self._timed_out() from None

    async def bounded(self, work: Awaitable[_T]) -> _T:
        """Await ``work`` (an async store call) for at most ``timeout``; ``ProblemError(504)``
        after, with ``work`` cancelled."""
        try:
            return await asyncio.wait_for(work, self.timeout)
        except TimeoutError:
            raise self._timed_out() from None

    def _timed_out(self) -> ProblemError:
        return ProblemError(
            504,
            f"the store did not answer within {self.timeout:g} s (--timeout); the call may "
            "still complete, so read before retrying a write",
        )

    def close(self) -> None:
        """Stop taking calls, wait for running ones, then close the state store and memory."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._state_guard:
            state, self._state = self._state, None
        try:
            if state is not None:
                state.close()
        finally:
            self.memory.close()
