"""Who may ask: with a token set, ``BearerGuard`` answers 401 (a problem document) to a request
without ``Authorization: Bearer <token>``, except a ``GET`` or ``HEAD`` of a path that holds no
data (``GET /v1/health``, the inspector's page); the header is compared in constant time, and
the token never appears in a response or a log line.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from affect_memory.exposure import bearer_authorised
from affect_memory.http.problems import ProblemError, problem_response

__all__ = ["HEALTH_PATH", "BearerGuard"]

_log = logging.getLogger(__name__)

HEALTH_PATH = "/v1/health"
"""The API path a bearer token is never asked for: a load balancer's probe has none (the
inspector's page paths are open too when it is served: ``create_app``)."""


class BearerGuard:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` gets a 401 problem,
    but for a ``GET`` or ``HEAD`` of one of ``open_paths``."""

    def __init__(
        self, app: ASGIApp, token: str, open_paths: frozenset[str] = frozenset({HEALTH_PATH})
    ) -> None:
        """Guard ``app`` with ``token``; ``open_paths`` hold no data (a probe, a page that asks
        for the token) and are read without it."""
        self._app = app
        self._token = token.encode("ascii")
        self._open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass lifespan, reads of the open paths and authorised requests through; answer 401."""
        if (
            scope["type"] != "http"
            or (scope.get("method") in ("GET", "HEAD") and scope.get("path") in self._open_paths)
            or self._authorised(scope)
        ):
            await self._app(scope, receive, send)
            return
        _log.info("refused a request without the bearer token")
        problem = ProblemError(
            401,
            "missing or wrong bearer token: send Authorization: Bearer <token>",
            field="Authorization",
            headers={"WWW-Authenticate": 'Bearer realm="affect-memory"'},
        )
        await problem_response(problem)(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        return bearer_authorised(scope.get("headers", ()), self._token)
