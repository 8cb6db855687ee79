"""The server's own state: ``/v1/health`` (open to all, no store call) and the store's stats."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from affect_memory.http.auth import HEALTH_PATH
from affect_memory.http.context import ServerContext
from affect_memory.kernel import __version__
from affect_memory.redaction import redact_url

__all__ = ["status_routes"]


def status_routes(context: ServerContext) -> list[BaseRoute]:
    """``GET /v1/health`` and ``GET /v1/stats``."""

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    async def stats(request: Request) -> Response:
        found = await context.call(context.memory.stats)
        payload = found.to_json()
        payload["location"] = redact_url(str(payload["location"]))  # a server URL's user-info
        return JSONResponse(payload)

    return [
        Route(HEALTH_PATH, health, methods=["GET"]),
        Route("/v1/stats", stats, methods=["GET"]),
    ]
