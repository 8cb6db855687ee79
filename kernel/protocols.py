"""The seams between the engine and the world: model, retriever, store, policy and turn effects.

Request and result types are frozen pydantic values; adapters are structural ``Protocol``s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import Field, StringConstraints

from affect_memory.kernel.appraisal import AppraisalOutcome
from affect_memory.kernel.bounds import NonNegativeInt, ZonedTimestamp
from affect_memory.kernel.models import (
    AffectState,
    DecodingParams,
    EmotionMap,
    FrozenModel,
    MemoryCandidate,
    Mood,
    UntrustedContext,
)
from affect_memory.kernel.retrieval import RetrievalWeights, ScoredCandidate

__all__ = [
    "AppraisalPolicy",
    "GateInput",
    "GateResult",
    "GenerateInput",
    "IntentGate",
    "MemoryRetriever",
    "Message",
    "ModelAdapter",
    "OutboxItem",
    "RankedRetriever",
    "RetrievalInput",
    "StateStore",
    "StateTransaction",
    "TurnEffects",
    "TurnRecord",
    "TurnResult",
]


class Message(FrozenModel):
    """One transcript message; the store stamps a zoned UTC time when it has none."""

    role: Literal["user", "assistant"]
    content: str
    timestamp: ZonedTimestamp | None = None


class GateInput(FrozenModel):
    """What the gate sees: the new message, the history before it, and the current state."""

    message: str
    history: tuple[Message, ...] = ()
    state: AffectState


class GateResult(FrozenModel):
    """The gate's decision: the intent, whether to answer at all, and whether to retrieve."""

    intent: str = "CASUAL"
    should_respond: bool = Field(default=True, strict=True)
    should_retrieve: bool = Field(default=False, strict=True)


class RetrievalInput(FrozenModel):
    """A retrieval request; ``state`` never carries the carried thought.

    ``weights`` are the ranking settings the engine will score the candidates with, so a
    retriever that prepares or prunes its candidates can do it for the same ranking.
    """

    query: str
    history: tuple[Message, ...] = ()
    state: AffectState
    limit: Annotated[int, Field(ge=1)]
    now: datetime
    weights: RetrievalWeights | None = None


class GenerateInput(FrozenModel):
    """A generation request: the system prompt is trusted wording, evidence travels apart."""

    message: str
    system_prompt: str
    history: tuple[Message, ...] = ()
    state: AffectState
    intent: str
    emotions: EmotionMap
    decoding: DecodingParams
    untrusted_context: UntrustedContext = UntrustedContext()
    max_tokens: NonNegativeInt | None = None


class TurnResult(FrozenModel):
    """What one committed turn produced."""

    text: str
    intent: str
    silent: bool
    mood: Mood
    emotions: EmotionMap
    memories: tuple[ScoredCandidate, ...] = ()


class OutboxItem(FrozenModel):
    """A side effect a committed turn owes the world, recorded in the same commit.

    ``id`` is deterministic so that applying an item twice is harmless.
    """

    id: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    topic: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    payload: dict[str, Any] = Field(default_factory=dict)


class TurnRecord(FrozenModel):
    """A committed turn as turn effects see it, to plan the writes it owes."""

    conversation_id: str
    turn_time: datetime
    user_id: str | None = None
    message: Message
    reply: Message | None
    intent: str
    state: AffectState
    active_emotions: EmotionMap
    memories: tuple[ScoredCandidate, ...] = ()


@runtime_checkable
class IntentGate(Protocol):
    """Decides a turn's intent and whether to respond and retrieve: a model adapter's gate half.

    An adapter may delegate its gate to one (the embedding gate, a model-backed gate).
    """

    async def gate(self, request: GateInput) -> GateResult:
        """Classify the message and decide whether to respond and retrieve."""
        ...


@runtime_checkable
class ModelAdapter(IntentGate, Protocol):
    """A language model: an async gate and a streaming generator of text chunks."""

    def generate(self, request: GenerateInput) -> AsyncIterator[str]:
        """Stream the reply as text chunks."""
        ...


@runtime_checkable
class MemoryRetriever(Protocol):
    """A source of memory candidates for a turn."""

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        """Candidates for the request, unranked; the kernel scores them.

        A retriever may also offer ``ranking_weights`` (``RetrievalWeights``): the weights its
        candidates are prepared for, which an engine without weights of its own ranks with.
        A wrapper must forward it and ``retrieve_ranked``, or turns rank differently from
        the wrapped store: subclass ``affect_memory.kernel.adapters.DelegatingRetriever``.
        One bound to a user may offer ``user_id`` (a str): an engine refuses one bound to
        another user than itself or its turn effects (which may offer ``user_id`` too).
        """
        ...


@runtime_checkable
class RankedRetriever(Protocol):
    """A retriever that ranks its own memories: a turn takes its order as it is.

    An engine given one asks it instead of ``retrieve`` and does not rank a second time: a
    turn takes the retriever's order as it is, less the memories the history window already
    shows (``skip_history_echoes``), cut to the turn's limit.
    """

    async def retrieve_ranked(self, request: RetrievalInput) -> Sequence[ScoredCandidate]:
        """The request's best memories, best first, each with its score and every part of it
        (at most ``request.limit``)."""
        ...


@runtime_checkable
class AppraisalPolicy(Protocol):
    """A synchronous appraisal of one turn."""

    def appraise(self, state: AffectState, intent: str, message: str) -> AppraisalOutcome:
        """The next state and the turn's active emotions."""
        ...


@runtime_checkable
class StateTransaction(Protocol):
    """One conversation's serialized transaction: load, then commit at most once."""

    async def load_state(self) -> AffectState | None:
        """The committed state, or None for a new conversation."""
        ...

    async def load_transcript(self, limit: int | None = None) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        ...

    async def commit(
        self,
        *,
        state: AffectState | None,
        messages: Sequence[Message],
        outbox: Sequence[OutboxItem] = (),
    ) -> None:
        """Write the new state (None keeps the old), the messages and the outbox atomically."""
        ...


@runtime_checkable
class StateStore(Protocol):
    """Durable per-conversation state, transcript and outbox."""

    def transaction(self, conversation_id: str) -> AbstractAsyncContextManager[StateTransaction]:
        """Hold the conversation exclusively for the length of one turn."""
        ...

    async def pending_outbox(self, topic: str, limit: int = 1000) -> tuple[OutboxItem, ...]:
        """Outbox items of a topic not yet marked applied, oldest first."""
        ...

    async def complete_outbox(self, ids: Sequence[str]) -> None:
        """Mark outbox items applied; unknown ids are ignored."""
        ...


@runtime_checkable
class TurnEffects(Protocol):
    """Writes a committed turn owes outside the store (e.g. memory updates), via the outbox."""

    topic: str

    def plan(self, turn: TurnRecord) -> Sequence[OutboxItem]:
        """The outbox items this turn owes; recorded in the turn's commit."""
        ...

    async def apply(self, items: Sequence[OutboxItem]) -> None:
        """Apply items idempotently; raising leaves them pending for a later retry."""
        ...
