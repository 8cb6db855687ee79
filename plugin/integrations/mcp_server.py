"""The MCP memory server: the memory tools (``TOOL_NAMES``) over stdio.

One ``ChromaMemory``, one state store (``ServerConfig.state_url``: SQLite or PostgreSQL) and one
``EmbeddingIntentGate`` are opened when the server starts (its lifespan) and shared by every
call, so the embedder loads once. stdout is the protocol: the SDK points fd 1 at stderr while
serving, and every log line goes to stderr.
What the tools do is ``affect_memory.integrations.mcp_tools``'s.

Every bad argument comes back as a tool error with one line naming the tool, the field and
the value; nothing is written by a call that fails. Arguments are checked strictly
(``affect_memory.integrations.mcp_arguments``) before the SDK's lenient validation sees them, and
the stdin reader screens each request first (``affect_memory.integrations.mcp_screen``) for the two
faults that never reach the SDK's parser intact: a repeated JSON key and a lone surrogate.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any, Literal, cast

from pydantic import Field, ValidationError

from affect_memory.errors import MissingExtraError
from affect_memory.integrations.mcp_arguments import check_arguments, explain_validation, one_prefix
from affect_memory.integrations.mcp_screen import REFUSAL_KEY, Rejection, screen_message
from affect_memory.integrations.mcp_tools import MAX_TOP_K, MemoryTools, ServerConfig, open_tools
from affect_memory.kernel import __version__
from affect_memory.kernel.errors import AffectMemoryError, shown

try:
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage
    from mcp_types import INVALID_PARAMS, ErrorData, JSONRPCError
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "the MCP server needs the 'mcp' extra: pip install -c constraints.txt 'affect-memory[mcp]'"
    ) from error

__all__ = ["SERVER_NAME", "TOOL_NAMES", "build_server", "serve_stdio"]

SERVER_NAME = "affect-memory"
"""The name the server announces to clients."""

TOOL_NAMES = (
    "remember",
    "recall",
    "forget",
    "list_memories",
    "export_memories",
    "erase_user",
    "appraise",
    "presence",
)
"""The tools the server offers, in listing order."""


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
        if REFUSAL_KEY in arguments:
            raise ToolError(one_prefix(name, str(arguments[REFUSAL_KEY])))
        schema = await self._schema(name)
        if schema is None:
            # A protocol error, as the MCP specification's tools section lists "unknown tools"
            # (the SDK would answer a tool result); bad arguments stay tool errors (SEP-1303).
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {shown(name)}")
        try:
            check_arguments(name, arguments, schema)
        except AffectMemoryError as error:
            raise ToolError(one_prefix(name, str(error))) from None
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error, UnexpectedToolError):
                raise
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                message = explain_validation(cause)
            else:
                message = str(error)
            raise ToolError(one_prefix(name, message)) from cause

    async def run_stdio_async(self) -> None:
        """Serve over stdio, each incoming line screened by ``screen_message`` first."""
        stdin = _ScreenedStdin()
        async with stdio_server(stdin=cast(Any, stdin)) as (read, write):
            stdin.answer_through(write)
            await self._lowlevel_server.run(
                read, write, self._lowlevel_server.create_initialization_options()
            )



class _ScreenedStdin:
    """The process's stdin as UTF-8 lines, each passed through ``screen_message``.

    A line the screen rejects is answered here, through the SDK's own outgoing stream (so the
    reply never interleaves with another on stdout), and the next line is read. Given its own
    stdin, the SDK leaves fd 0 as it is (it would otherwise point it at the null device);
    nothing this server runs reads standard input.
    """

    def __init__(self) -> None:
        self._lines = anyio.wrap_file(sys.stdin.buffer)
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_through(self, write: Any) -> None:
        """Send rejections on ``write``, the stream the SDK writes stdout from."""
        self._answers = write
        self._ready.set()

    def __aiter__(self) -> _ScreenedStdin:
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await self._lines.readline()
            if not raw:
                raise StopAsyncIteration
            if not raw.strip():
                continue  # a blank line is no message
            screened = screen_message(raw.rstrip(b"\r\n"))
            if not isinstance(screened, Rejection):
                return screened if screened.endswith("\n") else screened + "\n"
            await self._answer(screened)

    async def _answer(self, rejection: Rejection) -> None:
        await self._ready.wait()
        reply = JSONRPCError(
            jsonrpc="2.0",
            id=rejection.ident,
            error=ErrorData(code=rejection.code, message=rejection.message),
        )
        # the server may be shutting down, with nobody left to answer
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._answers.send(SessionMessage(reply))



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
        version=__version__,  # the package's version, announced in serverInfo at initialize
        instructions=(
            "Affect-aware long-term memory. remember stores a memory for a user; recall ranks a "
            "user's memories for a query with the score breakdown; forget deletes a user's "
            "memories by id; "
            "list_memories, export_memories and erase_user list, export and erase a user's "
            "data; "
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
        where: Annotated[
            dict[str, Any] | None,
            Field(
                description='Only memories meeting this filter, e.g. {"agent_id": "x"}, '
                '{"conversation_id": {"$in": ["c1", "c2"]}} or {"extra.project": "p"} '
                "(fields agent_id, conversation_id, extra.KEY; operators $eq, $in; all must "
                "hold); applied before ranking."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Rank a user's memories for a query; every result carries its score breakdown
        (score, distance, similarity, recency, salience, congruence, episode bonus). Read-only."""
        return await slot.run(lambda t: t.recall(query, user_id, top_k, mood_valence, where))

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
    async def list_memories(
        user_id: Annotated[str, Field(description="Whose memories to list.")],
        limit: Annotated[int, Field(description="Memories per page, 1-1000.")] = 50,
        offset: Annotated[int, Field(description="Memories to skip first.")] = 0,
    ) -> dict[str, Any]:
        """List a page of a user's memories, oldest first then by id, each whole with its
        recall count, and how many the user has in total. Read-only."""
        return await slot.run(lambda t: t.list_memories(user_id, limit, offset))

    @server.tool()
    async def export_memories(
        user_id: Annotated[str, Field(description="Whose memories to export.")],
    ) -> dict[str, Any]:
        """Export every memory of a user as records that `affect-memory ingest` reads back
        (write each as one line of a JSONL file), recall counts and times included. Read-only."""
        return await slot.run(lambda t: t.export_memories(user_id))

    @server.tool()
    async def erase_user(
        user_id: Annotated[str, Field(description="Whose data to erase.")],
        confirm: Annotated[
            bool, Field(description="Must be true: erasing cannot be undone.")
        ] = False,
    ) -> dict[str, Any]:
        """Erase every memory of a user and their conversations (state, transcript, outbox
        items) in the server's state store; other users are untouched. Needs confirm=true."""
        return await slot.run(lambda t: t.erase_user(user_id, confirm))

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
