"""Running the app under uvicorn, and saying where it listens once it accepts connections.

``listening_socket`` binds the address before anything slow happens, so a port in use or a
host that does not resolve is refused at once, in one line. The one line
``affect-memory serve: listening on http://HOST:PORT`` goes to stdout once uvicorn accepts
connections on it (with ``--port 0``, the port the system picked), so a script or a test waits
for it instead of sleeping. Access logs are off: a request's path names a user.
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from starlette.types import ASGIApp

from affect_memory.exposure import http_address
from affect_memory.kernel.errors import AffectMemoryError, shown

__all__ = ["LISTENING", "listening_socket", "serve"]

LISTENING = "affect-memory serve: listening on"
"""How the line announcing the address begins."""


class _AnnouncingServer(uvicorn.Server):
    """``uvicorn.Server`` that prints the address it bound once it is up."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start, then print ``LISTENING http://HOST:PORT`` on stdout (never the token)."""
        await super().startup(sockets)
        if not self.started or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        print(f"{LISTENING} {http_address(host, port)}", file=sys.stdout, flush=True)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: a free port), or one line saying why not."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise AffectMemoryError(
            f"--host {shown(host)} does not resolve: {error.strerror}"
        ) from None
    family, kind, protocol, _, address = found[0]
    bound = socket.socket(family, kind, protocol)
    try:
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bound.bind(address)
    except OSError as error:
        bound.close()
        raise AffectMemoryError(
            f"cannot listen on {host}:{port} (--host, --port): {error.strerror or error}"
        ) from None
    return bound


async def serve(app: ASGIApp, bound: socket.socket, *, log_level: str = "warning") -> None:
    """Serve ``app`` on the ``bound`` socket until interrupted (SIGINT or SIGTERM)."""
    host, port = bound.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    await _AnnouncingServer(config).serve(sockets=[bound])
