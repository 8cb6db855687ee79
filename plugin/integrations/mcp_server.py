"""The MCP memory server: remember, recall, forget, appraise and presence over stdio.

One ``ChromaMemory``, one ``SQLiteStateStore`` and one ``EmbeddingIntentGate`` are opened when
the server starts (its lifespan) and shared by every call, so the embedder loads once. stdout
is the protocol: the SDK points fd 1 at stderr while serving, and every log line goes to stderr.

``appraise`` is an appraisal-only turn. It runs the gate (unless the caller names the intent)
and the appraisal policy on the conversation's committed state, then commits the new state and
the user message in one store transaction. No model replies, so no assistant message is
written: the transcript of such a conversation holds user messages only, which is the truth.

Every bad argument comes back as a tool error with one line naming the tool, the field and
the value; nothing is written by a call that fails. Arguments are checked strictly before the
SDK's lenient validation sees them: an unknown (misspelled) name, a value of another JSON type
(``"0.5"`` or ``true`` for a number, ``"yes"`` for a boolean), a non-finite number, NUL or
other control characters in an id, and text without a visible character are refused. Two
faults never reach the SDK's parser intact, so the stdin reader screens each request first: a
repeated JSON key (``user_id`` twice would otherwise resolve last-wins) and a lone surrogate
(which the SDK's parser rejects without any reply) turn a ``tools/call`` into a tool error.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import logging
import math
import re
import secrets
import sys
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import Field, ValidationError

from kernel.affect import apply_length_factor, decoding_params, length_factor, mood_octant
from kernel.bounds import MAX_CONVERSATION_ID_CHARS, check_conversation_id, check_number
from kernel.engine import DEFAULT_APPRAISAL_POLICY, DEFAULT_ENGINE_LIMITS, normalize_intent
from kernel.errors import AffectMemoryError, InvalidInputError, shown
from kernel.models import AffectState
from kernel.protocols import AppraisalPolicy, Message, StateStore
from kernel.surfacing import build_presence_vector
from plugin.errors import MissingExtraError, RecordError
from plugin.memory.batches import parse_record
from plugin.memory.layout import DEFAULT_COLLECTION
from plugin.memory.records import DEFAULT_SIGNIFICANCE
from plugin.memory.store import ChromaMemory
from plugin.memory.timestamps import normalize_timestamp

try:
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.server.stdio import stdio_server
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
"""The most memories one ``recall`` returns."""

_REFUSAL_KEY = f"\x00refused-{secrets.token_hex(8)}"
"""An argument name no client can know: the stdin screen files a request's fault under it."""

_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode categories that show nothing by themselves: controls, format marks such as U+200B
and the BOM, spaces, and combining marks with nothing to combine with."""


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


def _lone_surrogate(text: str) -> int | None:
    """The 1-based position of the first lone surrogate in ``text``, or None."""
    for position, character in enumerate(text, start=1):
        if "\ud800" <= character <= "\udfff":
            return position
    return None


def _text(value: object, name: str, *, identifier: bool = False) -> str:
    """``value`` when it is Unicode text with a visible character; ids take no control chars."""
    position = _lone_surrogate(value) if isinstance(value, str) else None
    if position is not None:
        raise InvalidInputError(
            f"{name} has a lone surrogate at position {position}, which is not Unicode text"
        )
    if not isinstance(value, str) or not any(
        unicodedata.category(character) not in _INVISIBLE for character in value
    ):
        raise InvalidInputError(
            f"{name} must be a non-empty string with a visible character, got {shown(value)}"
        )
    if identifier:
        for position, character in enumerate(value, start=1):
            if unicodedata.category(character) == "Cc":
                raise InvalidInputError(
                    f"{name} must not contain control characters, got U+{ord(character):04X} "
                    f"at position {position}"
                )
    return value


def _conversation(value: object) -> str:
    """A conversation id: an identifier of at most 256 characters."""
    if isinstance(value, str) and len(value) > MAX_CONVERSATION_ID_CHARS:
        raise InvalidInputError(
            f"conversation_id must be at most {MAX_CONVERSATION_ID_CHARS} characters, "
            f"got {shown(value)}"
        )
    return check_conversation_id(_text(value, "conversation_id", identifier=True))


def _number(value: object, name: str) -> float:
    """A finite JSON number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidInputError(f"{name} must be a finite number, got {shown(value)}")
    return value  # as given, so an error downstream shows 2 rather than 2.0


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
        user_id = _text(user_id, "user_id", identifier=True)
        text = _text(text, "text")
        if timestamp is not None:
            timestamp = _text(timestamp, "timestamp", identifier=True)
        if significance is not None:
            significance = _number(significance, "significance")
        if emotional_valence is not None:
            emotional_valence = _number(emotional_valence, "emotional_valence")
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
        self, query: str, user_id: str, top_k: int = 6, mood_valence: float = 0.0
    ) -> dict[str, Any]:
        """The user's memories ranked for ``query``, each with its score breakdown. Read-only."""
        query = _text(query, "query")
        user_id = _text(user_id, "user_id", identifier=True)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInputError(
                f"top_k must be an integer from 1 to {MAX_TOP_K}, got {shown(top_k)}"
            )
        mood_valence = _number(mood_valence, "mood_valence")
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

    async def forget(self, ids: Sequence[str], user_id: str) -> dict[str, Any]:
        """Delete ``user_id``'s memories with these ids; reports the ids removed.

        The user is required: ids are per user, so an unscoped delete is refused.
        """
        user_id = _text(user_id, "user_id", identifier=True)
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise InvalidInputError(f"ids must be a list of memory ids, got {shown(ids)}")
        wanted = [_text(ident, f"ids[{index}]", identifier=True) for index, ident in enumerate(ids)]
        removed = await self._in_thread(lambda: self._memory.forget(wanted, user_id=user_id))
        return {"removed": list(removed)}

    async def appraise(
        self, conversation_id: str, message: str, intent: str | None = None
    ) -> dict[str, Any]:
        """Gate and appraise ``message``, commit the new state and the message, report both."""
        conversation_id = _conversation(conversation_id)
        message = _text(message, "message")
        cap = DEFAULT_ENGINE_LIMITS.max_message_chars
        if len(message) > cap:
            raise InvalidInputError(
                f"message has {len(message):,} characters; the limit is {cap:,}"
            )
        if intent is not None:
            chosen = normalize_intent(_text(intent, "intent", identifier=True))
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
        conversation_id = _conversation(conversation_id)
        async with self._store.transaction(conversation_id) as transaction:
            state = await transaction.load_state()
        return build_presence_vector(state or AffectState())


@asynccontextmanager
async def open_tools(config: ServerConfig, *, embedder: Any = None) -> AsyncIterator[MemoryTools]:
    """Open the memory, the state store and the gate on one embedder, loaded before serving."""
    from plugin.gate.classifier import EmbeddingIntentGate
    from plugin.models.embeddings import SentenceTransformerEmbedder
    from plugin.state.sqlite import SQLiteStateStore

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
    message = first["msg"]
    return f"{field}: {message[:1].lower()}{message[1:]}, got {shown(first.get('input'))}"


_JSON_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _json_types(schema: dict[str, Any]) -> list[str]:
    """The JSON types a property's schema admits (``anyOf`` of plain types included)."""
    if "type" in schema:
        kind = schema["type"]
        return list(kind) if isinstance(kind, list) else [kind]
    return [kind for option in schema.get("anyOf", ()) for kind in _json_types(option)]


def _is_json_type(value: object, kind: str) -> bool:
    """Whether ``value`` is of JSON type ``kind``, strictly: no bool for a number."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return kind == "null" and value is None


def _check_value(name: str, value: object, schema: dict[str, Any]) -> None:
    """Refuse a value of another JSON type than the schema's, a non-finite number or a
    string holding a lone surrogate."""
    kinds = _json_types(schema)
    if kinds and not any(_is_json_type(value, kind) for kind in kinds):
        named = [kind for kind in kinds if kind != "null"] or kinds  # null means "the default"
        expected = " or ".join(_JSON_TYPES.get(kind, kind) for kind in named)
        if kinds[0] == "array" and "type" in schema.get("items", {}):
            expected = f"a list of {schema['items']['type']}s"
        raise InvalidInputError(f"{name} must be {expected}, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number, got {shown(value)}")
    if isinstance(value, str):
        position = _lone_surrogate(value)
        if position is not None:
            raise InvalidInputError(
                f"{name} has a lone surrogate at position {position}, which is not Unicode text"
            )
    if isinstance(value, list):
        items: dict[str, Any] = schema.get("items") or next(
            (option.get("items", {}) for option in schema.get("anyOf", ()) if "items" in option),
            {},
        )
        for index, item in enumerate(value):
            _check_value(f"{name}[{index}]", item, items)


def check_arguments(name: str, arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Refuse unknown argument names and values the tool's input schema does not admit.

    The SDK validates leniently (``"0.5"`` becomes 0.5, ``"yes"`` True, an unknown name is
    dropped); a caller's typo must be an error, not a default.
    """
    properties: dict[str, Any] = schema.get("properties", {})
    for key in arguments:
        if key not in properties:
            close = difflib.get_close_matches(key, list(properties), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidInputError(
                f"unknown argument {shown(key)}{hint} (the arguments are {', '.join(properties)})"
            )
    for key, value in arguments.items():
        _check_value(key, value, properties[key])


def _one_prefix(name: str, message: str) -> str:
    """``message`` prefixed with the tool's name exactly once."""
    for prefix in (f"Error executing tool {name}: ", f"{name}: "):
        message = message.removeprefix(prefix)
    return f"{name}: {message}"


class _MemoryServer(MCPServer[Any]):
    """``MCPServer`` with strict arguments, one-line errors and a screened stdin."""

    _schemas: dict[str, dict[str, Any]] | None = None

    async def _schema(self, name: str) -> dict[str, Any] | None:
        if self._schemas is None:
            self._schemas = {tool.name: tool.input_schema for tool in await self.list_tools()}
        return self._schemas.get(name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """Call a tool after a strict check of its arguments; every refusal is one line."""
        if _REFUSAL_KEY in arguments:
            raise ToolError(_one_prefix(name, str(arguments[_REFUSAL_KEY])))
        schema = await self._schema(name)
        if schema is None:
            return await super().call_tool(name, arguments, context)
        try:
            check_arguments(name, arguments, schema)
        except AffectMemoryError as error:
            raise ToolError(_one_prefix(name, str(error))) from None
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error, UnexpectedToolError):
                raise
            cause = error.__cause__
            message = _explain(cause) if isinstance(cause, ValidationError) else str(error)
            raise ToolError(_one_prefix(name, message)) from cause

    async def run_stdio_async(self) -> None:
        """Serve over stdio, each incoming line screened by ``screen_line`` first."""
        async with stdio_server(stdin=cast(Any, _ScreenedStdin())) as (read, write):
            await self._lowlevel_server.run(
                read, write, self._lowlevel_server.create_initialization_options()
            )


class _DuplicateKeyError(ValueError):
    """A JSON object repeats a key."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _first_surrogate(value: Any, path: str) -> str | None:
    """The path of the first key or string under ``value`` with a lone surrogate."""
    if isinstance(value, str):
        return path if _lone_surrogate(value) is not None else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if _lone_surrogate(key) is not None:
                return f"{path or 'the request'} (a key)"
            found = _first_surrogate(item, where)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_surrogate(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def screen_line(line: str) -> str:
    """``line`` itself, or for a ``tools/call`` the SDK could not read faithfully a rewrite
    whose arguments carry only the refusal.

    Python's parser sees what the SDK's cannot: a repeated key (the SDK keeps the last) and a
    lone surrogate (the SDK drops the line without replying). Other messages pass unchanged.
    """
    try:
        message = json.loads(line, object_pairs_hook=_unique)
    except _DuplicateKeyError as error:
        key = shown(error.args[0])
        return _refusal(line, f"the request repeats the key {key}; JSON keys must be unique")
    except ValueError:
        return line  # not JSON: the SDK reports it as before
    params = message.get("params") if isinstance(message, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    found = _first_surrogate(arguments, "") if isinstance(arguments, dict) else None
    found = found or _first_surrogate(message, "")
    if found is None:
        return line
    return _refusal(line, f"{found} has a lone surrogate, which is not Unicode text")


def _refusal(line: str, fault: str) -> str:
    """A ``tools/call`` with the same id and tool whose only argument is ``fault``."""
    message = json.loads(line)  # last-wins, as the SDK would have read it
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return line
    ident = message.get("id")
    if (
        isinstance(ident, bool)
        or not isinstance(ident, int | str)
        or (isinstance(ident, str) and _lone_surrogate(ident) is not None)
    ):
        return line
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if not isinstance(name, str) or _lone_surrogate(name) is not None:
        name = "tools/call"
    rewritten = {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": name, "arguments": {_REFUSAL_KEY: fault}},
    }
    return json.dumps(rewritten) + "\n"


class _ScreenedStdin:
    """The process's stdin as UTF-8 lines, each passed through ``screen_line``.

    Given its own stdin, the SDK leaves fd 0 as it is (it would otherwise point it at the null
    device); nothing this server runs reads standard input.
    """

    def __init__(self) -> None:
        self._lines = anyio.wrap_file(sys.stdin.buffer)

    def __aiter__(self) -> _ScreenedStdin:
        return self

    async def __anext__(self) -> str:
        raw = await self._lines.readline()
        if not raw:
            raise StopAsyncIteration
        line = raw.decode("utf-8", errors="replace")
        return screen_line(line)


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
            "user's memories for a query with the score breakdown; forget deletes a user's "
            "memories by id; "
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
            str, Field(description="Whose memories; ids are per user, so it is required.")
        ],
    ) -> dict[str, Any]:
        """Delete a user's memories by id and return the ids that were removed."""
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
