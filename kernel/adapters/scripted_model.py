"""A scripted model adapter: queued gate results and replies, injectable failures, a request log."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

from affect_memory.kernel.protocols import GateInput, GateResult, GenerateInput

__all__ = ["ScriptedModel", "ScriptedReply"]


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted reply: its chunks, and optionally a failure or a pause part-way.

    ``error`` is raised after ``error_after`` chunks (0: before the first). ``pause`` is awaited
    after ``pause_after`` chunks; ``started`` is set as streaming begins.
    """

    chunks: Sequence[object] = ()
    error: BaseException | None = None
    error_after: int = 0
    pause: asyncio.Event | None = None
    pause_after: int = 1
    started: asyncio.Event | None = None
    delay: float = 0.0
    """Seconds to sleep before each chunk, to stand in for a slow model."""


GateScript = GateResult | BaseException | object
ReplyScript = ScriptedReply | Sequence[str] | BaseException


class ScriptedModel:
    """A ``ModelAdapter`` that plays back queued gate results and replies in order.

    A queued exception is raised at that step; any other non-``GateResult`` gate entry is
    returned as-is, to test how the engine treats malformed output. With a queue empty, the
    ``classify``/``respond`` callables decide, then the defaults; with no default, it raises.
    """

    def __init__(
        self,
        *,
        gates: Iterable[GateScript] = (),
        replies: Iterable[ReplyScript] = (),
        classify: Callable[[GateInput], GateResult] | None = None,
        respond: Callable[[GenerateInput], ReplyScript] | None = None,
        default_gate: GateResult | None = GateResult(),  # noqa: B008 - frozen value
        default_reply: Sequence[str] | None = ("Okay.",),
    ) -> None:
        """Queue ``gates`` and ``replies``; the fallbacks apply once a queue runs dry."""
        self._gates: deque[GateScript] = deque(gates)
        self._replies: deque[ReplyScript] = deque(replies)
        self._classify = classify
        self._respond = respond
        self._default_gate = default_gate
        self._default_reply = default_reply
        self.gate_requests: list[GateInput] = []
        """Every gate request received, in order."""
        self.generate_requests: list[GenerateInput] = []
        """Every generation request received, in order."""

    def queue_gate(self, *results: GateScript) -> None:
        """Append gate results (or exceptions to raise) to the queue."""
        self._gates.extend(results)

    def queue_reply(self, *replies: ReplyScript) -> None:
        """Append replies (chunk lists, ``ScriptedReply`` or exceptions) to the queue."""
        self._replies.extend(replies)

    async def gate(self, request: GateInput) -> GateResult:
        """The next queued gate result; a queued exception is raised."""
        self.gate_requests.append(request)
        if self._gates:
            entry = self._gates.popleft()
        elif self._classify is not None:
            entry = self._classify(request)
        elif self._default_gate is not None:
            entry = self._default_gate
        else:
            raise LookupError("ScriptedModel has no gate result queued")
        if isinstance(entry, BaseException):
            raise entry
        return entry  # type: ignore[return-value]  # malformed entries are returned on purpose

    def generate(self, request: GenerateInput) -> AsyncIterator[str]:
        """Stream the next queued reply; the request is logged at once."""
        self.generate_requests.append(request)
        if self._replies:
            entry = self._replies.popleft()
        elif self._respond is not None:
            entry = self._respond(request)
        elif self._default_reply is not None:
            entry = tuple(self._default_reply)
        else:
            raise LookupError("ScriptedModel has no reply queued")
        if isinstance(entry, BaseException):
            entry = ScriptedReply(error=entry)
        elif not isinstance(entry, ScriptedReply):
            entry = ScriptedReply(chunks=tuple(entry))
        return _play(entry)


async def _play(reply: ScriptedReply) -> AsyncIterator[str]:
    if reply.started is not None:
        reply.started.set()
    for index, chunk in enumerate(reply.chunks):
        if reply.error is not None and index == reply.error_after:
            raise reply.error
        if reply.pause is not None and index == reply.pause_after:
            await reply.pause.wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        yield chunk  # type: ignore[misc]  # non-str chunks are yielded on purpose
    if reply.error is not None and reply.error_after >= len(reply.chunks):
        raise reply.error
    if reply.pause is not None and reply.pause_after >= len(reply.chunks):
        await reply.pause.wait()
