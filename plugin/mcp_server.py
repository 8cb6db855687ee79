"""The MCP memory server: remember, recall, forget, appraise and presence over stdio.

One ``ChromaMemory``, one ``SQLiteStateStore`` and one ``EmbeddingIntentGate`` are opened when
the server starts (its lifespan) and shared by every call, so the embedder loads once. stdout
is the protocol: the SDK points fd 1 at stderr while serving, and every log line goes to stderr.

``appraise`` is an appraisal-only turn. It runs the gate (unless the caller names the intent)
and the appraisal policy on the conversation's committed state, then commits the new state and
the user message in one store transaction. No model replies, so no assistant message is
written: the transcript of such a conversation holds user messages only, which is the truth.

Every bad argument comes back as a tool error with one line naming the field and the value;
nothing is written by a call that fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from kernel.adapters.store_support import check_conversation_id
from kernel.affect import apply_length_factor, decoding_params, length_factor, mood_octant
from kernel.bounds import check_number
from kernel.engine import DEFAULT_APPRAISAL_POLICY, DEFAULT_ENGINE_LIMITS, normalize_intent
from kernel.errors import AffectMemoryError, InvalidInputError
from kernel.models import AffectState
from kernel.protocols import AppraisalPolicy, Message, StateStore
from kernel.surfacing import build_presence_vector
from plugin.chroma_memory import DEFAULT_COLLECTION, ChromaMemory
from plugin.errors import MissingExtraError, RecordError
from plugin.records import DEFAULT_SIGNIFICANCE, parse_record
from plugin.timestamps import normalize_timestamp

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "the MCP server needs the 'mcp' extra: pip install -c constraints.txt 'affect-memory[mcp]'"
    ) from error

__all__ = [
    "BASE_TOKENS",
    "SERVER_NAME",
    "TOOL_NAMES",
    "MemoryTools",
    "ServerConfig",
    "build_server",
    "memory_id",
    "open_tools",
    "serve_stdio",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "affect-memory"
"""The name the server announces to clients."""

TOOL_NAMES = ("remember", "recall", "forget", "appraise", "presence")
"""The tools the server offers, in listing order."""

BASE_TOKENS = 1024
"""The reply budget ``appraise`` scales by the mood's length factor (the engine's default)."""

MAX_TOP_K = 64


@dataclass(frozen=True)
class ServerConfig:
    """Where the server keeps its memories and conversation state."""

    data_dir: Path
    """Holds ``state.db`` (conversation state) and, without ``chroma_url``, ``chroma/``."""
    chroma_url: str | None = None
    """A Chroma server (``http://host:port``) instead of the embedded store."""
    collection: str = DEFAULT_COLLECTION


def _utc_now() -> datetime:
    return datetime.now(UTC)


def memory_id(user_id: str, text: str, timestamp: str) -> str:
    """A deterministic id from the owner, the exact text and the canonical timestamp."""
    digest = hashlib.sha256()
    for part in (user_id, text, timestamp):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return f"mem-{digest.hexdigest()[:32]}"


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string, got {value!r}")
    return value


class MemoryTools:
    """What the five tools do, over open resources; bad arguments raise ``AffectMemoryError``."""

    def __init__(
        self,
        memory: ChromaMemory,
        store: StateStore,
        gate: Any,
        *,
        policy: AppraisalPolicy = DEFAULT_APPRAISAL_POLICY,
        clock: Callable[[], datetime] = _utc_now,
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
        user_id = _text(user_id, "user_id")
        text = _text(text, "text")
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
            label = f"remember (id {fields['id']!r})"
            raise type(error)(str(error).replace(label, "remember", 1)) from None

    async def recall(
        self, query: str, user_id: str, top_k: int = 6, mood_valence: float = 0.0
    ) -> dict[str, Any]:
        """The user's memories ranked for ``query``, each with its score breakdown. Read-only."""
        query = _text(query, "query")
        user_id = _text(user_id, "user_id")
        try:
            mood_valence = check_number(mood_valence, -1.0, 1.0)
        except ValueError as error:
            raise InvalidInputError(f"mood_valence {error}") from None
        result = await self._in_thread(
            lambda: self._memory.recall(
                query, user_id, mood_valence=mood_valence, top_k=top_k, now=self._clock()
            )
        )
        payload: dict[str, Any] = result.to_json()
        return payload

    async def forget(self, ids: Sequence[str], user_id: str | None = None) -> dict[str, Any]:
        """Delete memories by id (only ``user_id``'s when given); reports the ids removed."""
        if user_id is not None:
            user_id = _text(user_id, "user_id")
        removed = await self._in_thread(lambda: self._memory.forget(ids, user_id=user_id))
        return {"removed": list(removed)}

    async def appraise(
        self, conversation_id: str, message: str, intent: str | None = None
    ) -> dict[str, Any]:
        """Gate and appraise ``message``, commit the new state and the message, report both."""
        check_conversation_id(conversation_id)
        message = _text(message, "message")
        cap = DEFAULT_ENGINE_LIMITS.max_message_chars
        if len(message) > cap:
            raise InvalidInputError(
                f"message has {len(message):,} characters; the limit is {cap:,}"
            )
        if intent is not None:
            chosen = normalize_intent(intent)
            gate: dict[str, Any] = {"source": "caller", "confidence": None, "should_retrieve": None}
        else:
            # The gate and the memory share one embedder: one encoding at a time.
            prediction = await self._in_thread(lambda: self._gate.classify(message))
            chosen = normalize_intent(prediction.intent)
            gate = {
                "source": "embedding-gate",
                "confidence": prediction.confidence,
                "should_retrieve": prediction.should_retrieve,
            }
        now = self._clock()
        async with self._store.transaction(conversation_id) as transaction:
            state = await transaction.load_state() or AffectState()
            outcome = self._policy.appraise(state, chosen, message)
            await transaction.commit(
                state=outcome.state,
                messages=(Message(role="user", content=message, timestamp=now.isoformat()),),
            )
        mood = outcome.state.mood
        decoding = decoding_params(mood)
        emotions = sorted(
            ((name, value) for name, value in outcome.active_emotions.items() if value > 0),
            key=lambda item: (-item[1], item[0]),
        )
        return {
            "conversation_id": conversation_id,
            "intent": outcome.intent,
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
        check_conversation_id(conversation_id)
        async with self._store.transaction(conversation_id) as transaction:
            state = await transaction.load_state()
        return build_presence_vector(state or AffectState())


@asynccontextmanager
async def open_tools(config: ServerConfig, *, embedder: Any = None) -> AsyncIterator[MemoryTools]:
    """Open the memory, the state store and the gate on one embedder, loaded before serving."""
    from plugin.embeddings import SentenceTransformerEmbedder
    from plugin.gate import EmbeddingIntentGate
    from plugin.sqlite_store import SQLiteStateStore

    model = embedder if embedder is not None else SentenceTransformerEmbedder()
    location: str | Path = config.chroma_url or config.data_dir / "chroma"
    async with AsyncExitStack() as stack:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        memory = stack.enter_context(
            ChromaMemory(location, collection=config.collection, embedder=model, progress=False)
        )
        store = SQLiteStateStore(config.data_dir / "state.db")
        stack.callback(store.close)
        gate = EmbeddingIntentGate(model)
        # Load the model and embed the exemplars now, not inside the first call.
        await asyncio.to_thread(gate.classify, "hello")
        logger.info("affect-memory MCP server ready on %s", memory.location)
        yield MemoryTools(memory, store, gate)


def _explain(error: ValidationError) -> str:
    """One line for the first argument the SDK's schema validation refused."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "arguments"
    if first["type"] == "missing":
        return f"{field} is required"
    shown = repr(first.get("input"))
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    message = first["msg"]
    return f"{field}: {message[:1].lower()}{message[1:]}, got {shown}"


class _MemoryServer(MCPServer[Any]):
    """``MCPServer`` whose schema-validation errors are one line, like the tools' own."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """Call a tool; an argument the schema refuses is reported in one line."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(error, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_explain(cause)}") from cause


class _Slot:
    """The open ``MemoryTools`` for the server's lifetime."""

    tools: MemoryTools | None = None

    async def run(self, call: Callable[[MemoryTools], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        if self.tools is None:
            raise ToolError("the memory server is not open yet")
        try:
            return await call(self.tools)
        except AffectMemoryError as error:
            raise ToolError(str(error)) from error


Text = Annotated[str, Field(description="Non-empty text.")]
UserId = Annotated[str, Field(description="Whose memories; every read and write is per user.")]
ConversationId = Annotated[str, Field(description="The conversation (1-256 characters).")]


def build_server(
    config: ServerConfig,
    *,
    embedder: Any = None,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> MCPServer[Any]:
    """The MCP server over ``config``; resources open when it starts and close when it stops."""
    slot = _Slot()

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        async with open_tools(config, embedder=embedder) as tools:
            slot.tools = tools
            try:
                yield None
            finally:
                slot.tools = None

    server = _MemoryServer(
        SERVER_NAME,
        instructions=(
            "Affect-aware long-term memory. remember stores a memory for a user; recall ranks a "
            "user's memories for a query with the score breakdown; forget deletes by id; "
            "appraise commits one user message's appraisal to a conversation's affect state; "
            "presence reports a conversation's committed affect."
        ),
        lifespan=lifespan,
        log_level=log_level,
    )

    @server.tool()
    async def remember(
        text: Text,
        user_id: UserId,
        timestamp: Annotated[
            str | None,
            Field(
                description="When it happened: zoned ISO-8601 (e.g. 2026-05-01T09:30:00Z); "
                "default now (UTC). Pass it to make a retried call idempotent."
            ),
        ] = None,
        significance: Annotated[
            float | None, Field(description="How much it matters, in [0, 1]; default 0.5.")
        ] = None,
        emotional_valence: Annotated[
            float | None, Field(description="Its feeling tone, in [-1, 1]; default 0.")
        ] = None,
        episode: Annotated[
            bool | None, Field(description="A defining life episode (earns a score bonus).")
        ] = None,
    ) -> dict[str, Any]:
        """Store a memory for a user and return its id (the same for the same user, text and
        timestamp, so a retried call stores nothing twice)."""
        return await slot.run(
            lambda t: t.remember(text, user_id, timestamp, significance, emotional_valence, episode)
        )

    @server.tool()
    async def recall(
        query: Text,
        user_id: UserId,
        top_k: Annotated[int, Field(description=f"How many memories, 1-{MAX_TOP_K}.")] = 6,
        mood_valence: Annotated[
            float, Field(description="The current mood valence in [-1, 1] (mood congruence).")
        ] = 0.0,
    ) -> dict[str, Any]:
        """Rank a user's memories for a query; every result carries its score breakdown
        (score, distance, similarity, recency, salience, congruence, episode bonus). Read-only."""
        return await slot.run(lambda t: t.recall(query, user_id, top_k, mood_valence))

    @server.tool()
    async def forget(
        ids: Annotated[list[str], Field(description="Memory ids to delete.")],
        user_id: Annotated[
            str | None, Field(description="Only delete memories of this user.")
        ] = None,
    ) -> dict[str, Any]:
        """Delete memories by id and return the ids that were removed."""
        return await slot.run(lambda t: t.forget(ids, user_id))

    @server.tool()
    async def appraise(
        conversation_id: ConversationId,
        message: Annotated[str, Field(description="The user's message.")],
        intent: Annotated[
            str | None,
            Field(
                description="ABUSE, APOLOGY, VULNERABILITY, CURIOSITY, CHALLENGE, NEGLECT or "
                "CASUAL; default: the offline embedding gate classifies the message."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Appraise a user message in a conversation and commit the new affect state (and the
        message) to the state store; returns the intent, PAD mood, octant, active emotions and
        response controls (temperature, top_p, length factor, token budget)."""
        return await slot.run(lambda t: t.appraise(conversation_id, message, intent))

    @server.tool()
    async def presence(conversation_id: ConversationId) -> dict[str, Any]:
        """The presence payload (mood, trust, relationship, status line) of a conversation's
        committed state."""
        return await slot.run(lambda t: t.presence(conversation_id))

    return server


async def serve_stdio(config: ServerConfig, *, embedder: Any = None) -> None:
    """Serve ``config`` over stdin and stdout until the client closes stdin."""
    await build_server(config, embedder=embedder).run_stdio_async()
