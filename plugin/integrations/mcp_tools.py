"""What the MCP server's tools do: remember, recall, forget, appraise and presence, and a
user's data rights (list_memories, export_memories, erase_user).

``appraise`` is an appraisal-only turn through ``AffectEngine``: its model adapter's gate
returns the tool's decision (the caller's intent, or the embedding gate's) and its reply is
empty, so the engine appraises the conversation's committed state and commits the new state
and the user message in one transaction, with no assistant message (an empty reply is none).
The tool reports that turn's intent, mood, octant, active emotions and response controls.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.errors import RecordError
from affect_memory.integrations.mcp_arguments import (
    conversation_argument,
    number_argument,
    text_argument,
)
from affect_memory.kernel.affect import (
    apply_length_factor,
    decoding_params,
    length_factor,
    mood_octant,
)
from affect_memory.kernel.bounds import check_number
from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.engine import (
    DEFAULT_APPRAISAL_POLICY,
    AffectEngine,
    EnginePolicies,
    EnginePresentation,
)
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.protocols import (
    AppraisalPolicy,
    GateInput,
    GateResult,
    GenerateInput,
    StateStore,
)
from affect_memory.memory.batches import parse_record
from affect_memory.memory.chroma.layout import DEFAULT_COLLECTION
from affect_memory.memory.chroma.location import DEFAULT_TIMEOUT
from affect_memory.memory.export import check_page, record_line
from affect_memory.memory.filters import parse_where
from affect_memory.memory.records import DEFAULT_SIGNIFICANCE
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.timestamps import normalize_timestamp

__all__ = [
    "BASE_TOKENS",
    "MAX_TOP_K",
    "AppraisalModel",
    "MemoryTools",
    "ServerConfig",
    "memory_id",
    "open_tools",
]

logger = logging.getLogger(__name__)

BASE_TOKENS = 1024
"""The reply budget ``appraise`` scales by the mood's length factor (the engine's default)."""

MAX_TOP_K = 64
"""The most memories one ``recall`` returns."""


@dataclass(frozen=True)
class ServerConfig:
    """Where the server keeps its memories and conversation state."""

    data_dir: Path
    """Holds ``state.db`` (conversation state, without ``state_url``) and, without
    ``chroma_url``, ``chroma/``."""
    chroma_url: str | None = None
    """A Chroma server (``http://host:port``) instead of the embedded store."""
    collection: str = DEFAULT_COLLECTION
    state_url: str | None = None
    """The state store (a path, ``sqlite:////PATH`` or ``postgresql://...``); None means
    ``$AFFECT_MEMORY_STATE``, else ``data_dir/state.db``."""
    index_url: str | None = None
    """The memory index (``postgresql://...`` or a SQLite path); None: the store's default."""
    timeout: float = DEFAULT_TIMEOUT
    """Longest wait in seconds for one request to the Chroma server."""


def memory_id(user_id: str, text: str, timestamp: str) -> str:
    """A deterministic id from the owner, the exact text and the canonical timestamp."""
    digest = hashlib.sha256()
    for part in (user_id, text, timestamp):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return f"mem-{digest.hexdigest()[:32]}"


async def _no_reply() -> AsyncIterator[str]:
    return
    yield  # an async generator that yields nothing


class AppraisalModel:
    """The model adapter of an appraisal-only turn: a given gate decision, and no reply."""

    def __init__(self, decide: Callable[[GateInput], Awaitable[GateResult]]) -> None:
        """Gate every turn with ``decide``."""
        self._decide = decide

    async def gate(self, request: GateInput) -> GateResult:
        """The tool's decision for the message."""
        return await self._decide(request)

    def generate(self, request: GenerateInput) -> AsyncIterator[str]:
        """No text: the turn is appraised and committed without an assistant message."""
        return _no_reply()


class MemoryTools:
    """What the eight tools do, over open resources; bad arguments raise ``AffectMemoryError``."""

    def __init__(
        self,
        memory: ChromaMemory,
        store: StateStore,
        gate: Any,
        *,
        policy: AppraisalPolicy = DEFAULT_APPRAISAL_POLICY,
        clock: Clock = utc_now,
        base_tokens: int = BASE_TOKENS,
    ) -> None:
        """Serve ``memory``, a ``StateStore`` and a gate with ``classify(text)``."""
        self._memory = memory
        self._store = store
        self._gate = gate
        self._policy = policy
        self._clock = clock
        self._base_tokens = base_tokens
        # One Chroma client and one embedder, used from worker threads: one call at a time.
        self._memory_lock = asyncio.Lock()

    async def _in_thread(self, work: Callable[[], Any]) -> Any:
        async with self._memory_lock:
            return await asyncio.to_thread(work)

    async def remember(
        self,
        text: str,
        user_id: str,
        timestamp: str | None = None,
        significance: float | None = None,
        emotional_valence: float | None = None,
        episode: bool | None = None,
    ) -> dict[str, Any]:
        """Store one memory; the same user, text and timestamp always give the same id."""
        user_id = text_argument(user_id, "user_id", identifier=True)
        text = text_argument(text, "text")
        if timestamp is not None:
            timestamp = text_argument(timestamp, "timestamp", identifier=True)
        if significance is not None:
            significance = number_argument(significance, "significance")
        if emotional_valence is not None:
            emotional_valence = number_argument(emotional_valence, "emotional_valence")
        if episode is not None and not isinstance(episode, bool):
            raise InvalidInputError(f"episode must be true or false, got {shown(episode)}")
        moment = self._clock() if timestamp is None else timestamp
        stamp = normalize_timestamp(moment, field="timestamp").iso
        ident = memory_id(user_id, text, stamp)
        record = self._record(
            {
                "id": ident,
                "text": text,
                "user_id": user_id,
                "timestamp": stamp,
                "significance": DEFAULT_SIGNIFICANCE if significance is None else significance,
                "emotional_valence": 0.0 if emotional_valence is None else emotional_valence,
                "episode": False if episode is None else episode,
            }
        )
        report = await self._in_thread(lambda: self._memory.add([record], progress=False))
        return {"id": ident, "created": report.written == 1, "timestamp": stamp}

    @staticmethod
    def _record(fields: dict[str, Any]) -> Any:
        """A validated record; errors name the field without the derived id."""
        try:
            return parse_record(fields, where="remember")
        except RecordError as error:
            message = re.sub(r"^remember \(id [^)]*\)", "remember", str(error), count=1)
            raise type(error)(message) from None

    async def recall(
        self,
        query: str,
        user_id: str,
        top_k: int = 6,
        mood_valence: float = 0.0,
        where: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The user's memories ranked for ``query``, each with its score breakdown, among those
        meeting ``where`` (``affect_memory.memory.filters``). Read-only."""
        query = text_argument(query, "query")
        user_id = text_argument(user_id, "user_id", identifier=True)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInputError(
                f"top_k must be an integer from 1 to {MAX_TOP_K}, got {shown(top_k)}"
            )
        mood_valence = number_argument(mood_valence, "mood_valence")
        try:
            mood_valence = check_number(mood_valence, -1.0, 1.0)
        except ValueError as error:
            raise InvalidInputError(f"mood_valence {error}") from None
        checked = parse_where(where)
        result = await self._in_thread(
            lambda: self._memory.recall(
                query,
                user_id,
                mood_valence=mood_valence,
                top_k=top_k,
                now=self._clock(),
                where=checked,
            )
        )
        payload: dict[str, Any] = result.to_json()
        return payload

    async def forget(self, ids: Sequence[str], user_id: str) -> dict[str, Any]:
        """Delete ``user_id``'s memories with these ids; reports the ids removed.

        The user is required: ids are per user, so an unscoped delete is refused.
        """
        user_id = text_argument(user_id, "user_id", identifier=True)
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise InvalidInputError(f"ids must be a list of memory ids, got {shown(ids)}")
        wanted = [
            text_argument(ident, f"ids[{index}]", identifier=True)
            for index, ident in enumerate(ids)
        ]
        removed = await self._in_thread(lambda: self._memory.forget(wanted, user_id=user_id))
        return {"removed": list(removed)}

    async def list_memories(self, user_id: str, limit: int, offset: int) -> dict[str, Any]:
        """A page of ``user_id``'s memories, oldest first, each whole (as ``export`` writes it),
        with how many the user has. Read-only."""
        user_id = text_argument(user_id, "user_id", identifier=True)
        limit, offset = check_page(limit, offset)
        records, total = await self._in_thread(
            lambda: (
                self._memory.list(user_id, limit=limit, offset=offset),
                self._memory.count(user_id),
            )
        )
        return {
            "user_id": user_id,
            "total": total,
            "offset": offset,
            "memories": [record_line(record) for record in records],
        }

    async def export_memories(self, user_id: str) -> dict[str, Any]:
        """Every memory of ``user_id`` as records ``affect-memory ingest`` reads back (one per
        line of a JSONL file), recall counts included. Read-only."""
        user_id = text_argument(user_id, "user_id", identifier=True)
        lines = await self._in_thread(lambda: list(self._memory.export(user_id)))
        return {"user_id": user_id, "count": len(lines), "records": lines}

    async def erase_user(self, user_id: str, confirm: bool) -> dict[str, Any]:
        """Erase every memory of ``user_id`` and their conversations in the server's state
        store; ``confirm`` must be true (else nothing is erased)."""
        user_id = text_argument(user_id, "user_id", identifier=True)
        if confirm is not True:
            raise InvalidInputError(
                f"confirm must be true to erase user {shown(user_id)}, got {shown(confirm)}; "
                "nothing was erased"
            )
        eraser = getattr(self._store, "erase_user", None)
        state = await eraser(user_id) if eraser is not None else None
        report = await self._in_thread(lambda: self._memory.erase_user(user_id))
        return {
            "user_id": user_id,
            "memories": report.memories,
            "conversations": [] if state is None else list(state.conversations),
            "messages": 0 if state is None else state.messages,
            "outbox_items": 0 if state is None else state.outbox_items,
        }


    def _engine(
        self, conversation_id: str, decide: Callable[[GateInput], Awaitable[GateResult]]
    ) -> AffectEngine:
        return AffectEngine(
            model=AppraisalModel(decide),
            store=self._store,
            conversation_id=conversation_id,
            clock=self._clock,
            policies=EnginePolicies(appraisal_policy=self._policy),
            presentation=EnginePresentation(base_tokens=self._base_tokens),
        )

    async def appraise(
        self, conversation_id: str, message: str, intent: str | None = None
    ) -> dict[str, Any]:
        """Gate and appraise ``message`` as one engine turn, committing the new state and the
        message; report the intent, the gate's call, the mood and the response controls."""
        conversation_id = conversation_argument(conversation_id)
        message = text_argument(message, "message")
        gate: dict[str, Any] = {"source": "caller", "confidence": None, "should_retrieve": None}
        if intent is not None:
            given = text_argument(intent, "intent", identifier=True)

            async def decide(request: GateInput) -> GateResult:
                return GateResult(intent=given)  # the engine normalizes it, or refuses it

        else:

            async def decide(request: GateInput) -> GateResult:
                # The gate and the memory share one embedder: one encoding at a time.
                prediction = await self._in_thread(lambda: self._gate.classify(request.message))
                gate.update(
                    source="embedding-gate",
                    confidence=prediction.confidence,
                    should_retrieve=prediction.should_retrieve,
                )
                return GateResult(
                    intent=prediction.intent, should_retrieve=prediction.should_retrieve
                )

        result = await self._engine(conversation_id, decide).turn(message)
        mood = result.mood
        decoding = decoding_params(mood)
        emotions = sorted(
            ((name, value) for name, value in result.emotions.items() if value > 0),
            key=lambda item: (-item[1], item[0]),
        )
        return {
            "conversation_id": conversation_id,
            "intent": result.intent,
            "gate": gate,
            "mood": {"valence": mood.valence, "arousal": mood.arousal, "dominance": mood.dominance},
            "octant": mood_octant(mood),
            "emotions": dict(emotions),
            "controls": {
                "temperature": decoding.temperature,
                "top_p": decoding.top_p,
                "length_factor": length_factor(mood),
                "base_tokens": self._base_tokens,
                "max_tokens": apply_length_factor(self._base_tokens, mood),
            },
        }

    async def presence(self, conversation_id: str) -> dict[str, Any]:
        """The presence payload of the committed state (a fresh state's for a new conversation)."""
        conversation_id = conversation_argument(conversation_id)

        async def never(request: GateInput) -> GateResult:  # presence runs no turn
            raise AssertionError("presence does not gate")

        return await self._engine(conversation_id, never).presence()


@asynccontextmanager
async def open_tools(config: ServerConfig, *, embedder: Any = None) -> AsyncIterator[MemoryTools]:
    """Open the memory, the state store and the gate on one embedder, loaded before serving."""
    from affect_memory.gate.classifier import EmbeddingIntentGate
    from affect_memory.models.embeddings import default_embedder
    from affect_memory.state.location import open_state_store

    model = embedder if embedder is not None else default_embedder()
    location: str | Path = config.chroma_url or config.data_dir / "chroma"
    async with AsyncExitStack() as stack:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        memory = stack.enter_context(
            ChromaMemory(
                location,
                collection=config.collection,
                embedder=model,
                progress=False,
                index=config.index_url,
                timeout=config.timeout,
            )
        )
        store = open_state_store(
            config.state_url,
            data_dir=config.data_dir,
            source=None if config.state_url is None else "state_url",
        )
        stack.callback(store.close)
        gate = EmbeddingIntentGate(model)
        # Load the model and embed the exemplars now, not inside the first call.
        await asyncio.to_thread(gate.classify, "hello")
        logger.info("affect-memory MCP server ready on %s", memory.location)
        yield MemoryTools(memory, store, gate)
