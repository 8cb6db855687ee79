"""The Starlette application: every route of the API, problem documents for every error.

``create_app`` mounts the memory, recall, user and status routes, the conversation routes
(``affect_memory.http.conversations``), the inspector's pages when asked
(``affect_memory.http.inspector``) and ``GET /openapi.json``. Errors never leave as tracebacks:
a ``ProblemError`` is its own document, routing's 404 and 405 become documents, a caller's bad
value maps to 422 and an unusable store to 503 (``problems.problem_of``), and any other error
is a 500 (``ProblemBoundary`` for anything raised outside them) whose cause is logged with
secrets masked.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from affect_memory.http.auth import HEALTH_PATH, BearerGuard
from affect_memory.http.context import ServerContext
from affect_memory.http.conversations import conversation_routes
from affect_memory.http.inspector import PAGE_PATHS, inspector_routes
from affect_memory.http.memories import memory_routes
from affect_memory.http.openapi import openapi_document
from affect_memory.http.problems import (
    ProblemError,
    handle_http_exception,
    handle_problem,
    problem_of,
    problem_response,
)
from affect_memory.http.recall import recall_routes
from affect_memory.http.status import status_routes
from affect_memory.http.users import user_routes
from affect_memory.kernel.errors import AffectMemoryError
from affect_memory.redaction import redact

__all__ = ["OPENAPI_PATH", "ProblemBoundary", "create_app"]

OPENAPI_PATH = "/openapi.json"
"""Where the OpenAPI document is served."""

_log = logging.getLogger(__name__)


class ProblemBoundary:
    """ASGI middleware: an exception no handler took becomes a 500 problem, never a traceback.

    The cause is logged on one line with secrets masked. An error after the response started
    (a stream cut short) can only be logged.
    """

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request; answer 500 in its place if it fails before answering."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._app(scope, receive, sending)
        except Exception as error:
            if started:
                _log.error(
                    "a response failed after it started: %s: %s",
                    type(error).__name__,
                    redact(str(error))[:2000],
                )
                return
            await problem_response(problem_of(error))(scope, receive, send)


def api_routes(context: ServerContext, *, inspector: bool = False) -> list[BaseRoute]:
    """Every route of the API (not yet ``/openapi.json``), in matching order."""
    routes: list[BaseRoute] = [
        *status_routes(context),
        *user_routes(context),
        *memory_routes(context),
        *recall_routes(context),
        *conversation_routes(context),
    ]
    if inspector:
        routes.extend(inspector_routes())
    return routes


def create_app(
    context: ServerContext, *, inspector: bool = False, token: str | None = None
) -> Starlette:
    """The API serving ``context``; with ``token``, every request needs ``Authorization:
    Bearer <token>`` but reads of ``/v1/health`` and the inspector's page (which asks for the
    token); with ``inspector``, the inspector is at ``/``."""
    document = openapi_document()

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    routes = [*api_routes(context, inspector=inspector), Route(OPENAPI_PATH, openapi)]
    middleware = [Middleware(ProblemBoundary)]
    if token is not None:
        open_paths = frozenset({HEALTH_PATH, *(PAGE_PATHS if inspector else ())})
        middleware.insert(0, Middleware(BearerGuard, token=token, open_paths=open_paths))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPException: handle_http_exception,
            AffectMemoryError: handle_problem,
            ProblemError: handle_problem,
        },
    )
