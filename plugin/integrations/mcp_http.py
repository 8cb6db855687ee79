"""The MCP memory server over streamable HTTP: loopback by default, a bearer token otherwise.

The SDK's streamable-HTTP app serves the same server ``build_server`` makes for stdio, its
resources opened once for every session. Two ASGI layers wrap it: ``BearerGuard`` answers 401
to a request without ``Authorization: Bearer <token>`` when a token is set (compared in constant
time; the token is never logged nor echoed), and ``ScreenedBodies`` passes each POSTed
JSON-RPC message through the stdin screen (``affect_memory.integrations.mcp_screen``), so a
repeated key or a lone surrogate is refused over HTTP as it is over stdio. Any host that is not
loopback needs a token: ``check_http_settings`` refuses it otherwise.
"""

from __future__ import annotations

import logging
import socket
import sys
from typing import Any, Literal

from affect_memory.errors import MissingExtraError
from affect_memory.exposure import bearer_authorised, check_exposure, http_address
from affect_memory.integrations.mcp_screen import Rejection, screen_message
from affect_memory.integrations.mcp_server import build_server
from affect_memory.integrations.mcp_tools import ServerConfig

try:
    import uvicorn
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "the MCP server needs the 'mcp' extra: pip install -c constraints.txt 'affect-memory[mcp]'"
    ) from error

__all__ = [
    "DEFAULT_HTTP_HOST",
    "DEFAULT_HTTP_PORT",
    "MCP_PATH",
    "TOKEN_ENV",
    "BearerGuard",
    "ScreenedBodies",
    "check_http_settings",
    "http_app",
    "serve_http",
]

DEFAULT_HTTP_HOST = "127.0.0.1"
"""Where the HTTP server listens unless told otherwise: this machine only."""

DEFAULT_HTTP_PORT = 8765
"""The HTTP server's default port (not Chroma's 8000, which a shared memory server may hold)."""

MCP_PATH = "/mcp"
"""The endpoint path, the SDK's default."""

TOKEN_ENV = "AFFECT_MEMORY_MCP_TOKEN"
"""The environment variable the bearer token is read from when ``--token`` is not given."""

_log = logging.getLogger(__name__)


def check_http_settings(host: str, port: int, token: str | None) -> str | None:
    """The token the MCP HTTP server requires (None: none), after refusing what would serve
    unsafely (``affect_memory.exposure.check_exposure``)."""
    return check_exposure(host, port, token, token_env=TOKEN_ENV)


class BearerGuard:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        """Guard ``app``: every HTTP request must carry ``token``."""
        self._app = app
        self._token = token.encode("ascii")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass lifespan and authorised requests through; answer 401 to the rest."""
        if scope["type"] != "http" or self._authorised(scope):
            await self._app(scope, receive, send)
            return
        _log.info("refused an HTTP request without the bearer token")
        body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
        challenge = (b"www-authenticate", b'Bearer realm="affect-memory"')
        await _send_json(send, 401, body, challenge)

    def _authorised(self, scope: Scope) -> bool:
        return bearer_authorised(scope.get("headers", ()), self._token)


class ScreenedBodies:
    """ASGI middleware: each POSTed message passes through ``screen_message`` first, as stdin's
    do; one it rejects is answered 400 with its JSON-RPC error, as the SDK answers a body it
    cannot parse.

    A body larger than the SDK's limit passes unscreened, for the SDK to refuse.
    """

    def __init__(self, app: ASGIApp, *, limit: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        """Screen ``app``'s request bodies of up to ``limit`` bytes."""
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Screen a POST's body, then hand the request on with it."""
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        complete = False
        tail: Message | None = None  # a disconnect that came before the body ended
        while True:
            message = await receive()
            if message["type"] != "http.request":
                tail = message
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if not message.get("more_body", False):
                complete = True
                break
            if size > self._limit:
                break  # the rest still comes from receive, for the SDK to refuse
        body = b"".join(chunks)
        if complete:
            screened = screen_message(body)
            if isinstance(screened, Rejection):
                _log.info("refused a POSTed message: %s", screened.message)
                await _reject(send, screened)
                return
            if screened.encode("utf-8") != body:
                body = screened.encode("utf-8")
                headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode("ascii")))
                scope = {**scope, "headers": headers}
        queue: list[Message] = [{"type": "http.request", "body": body, "more_body": not complete}]
        if tail is not None:
            queue.append(tail)

        async def replayed() -> Message:
            return queue.pop(0) if queue else await receive()

        await self._app(scope, replayed, send)


async def _reject(send: Send, rejection: Rejection) -> None:
    """Answer 400 with ``rejection`` as the JSON-RPC error body."""
    await _send_json(send, 400, rejection.to_line().encode("utf-8"))


async def _send_json(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    """Send one whole JSON response of ``status`` with ``body`` and any extra ``headers``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Server(uvicorn.Server):
    """``uvicorn.Server`` that says where it serves once it is ready (the model loaded)."""

    guard = ""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start, then print one line on stderr with the bound address (never the token)."""
        await super().startup(sockets)
        if not self.started or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        print(
            f"affect-memory mcp: serving {http_address(host, port)}{MCP_PATH} with {self.guard}",
            file=sys.stderr,
            flush=True,
        )


def http_app(
    config: ServerConfig,
    *,
    host: str = DEFAULT_HTTP_HOST,
    token: str | None = None,
    embedder: Any = None,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> ASGIApp:
    """The ASGI app serving ``config``'s tools at ``MCP_PATH``, guarded when ``token`` is set."""
    server = build_server(config, embedder=embedder, log_level=log_level)
    app: ASGIApp = ScreenedBodies(
        server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    )
    return app if token is None else BearerGuard(app, token)


async def serve_http(
    config: ServerConfig,
    *,
    host: str = DEFAULT_HTTP_HOST,
    port: int = DEFAULT_HTTP_PORT,
    token: str | None = None,
    embedder: Any = None,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> None:
    """Serve ``config`` over streamable HTTP until interrupted; refuses a non-loopback ``host``
    without a ``token``."""
    token = check_http_settings(host, port, token)
    app = http_app(config, host=host, token=token, embedder=embedder, log_level=log_level)
    server = _Server(
        uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), access_log=False)
    )
    server.guard = "a bearer token" if token else "no token (loopback only)"
    await server.serve()
