"""Errors as RFC 9457 problem documents: ``application/problem+json`` with a one-line detail.

Every refusal the API makes is a ``ProblemError`` carrying the status, a one-line ``detail``
naming the field and the bad value, and the ``field`` itself. ``problem_of`` turns the
project's own errors into problems (a caller's bad value is 422, a store that cannot be used
503); anything else becomes a 500 whose detail says nothing of the cause, which is logged
with secrets masked. No response ever carries a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from affect_memory.errors import StoreLockedError, StoreUnavailableError
from affect_memory.kernel.errors import InvalidInputError, StateStoreError
from affect_memory.redaction import redact

__all__ = [
    "PROBLEM_MEDIA_TYPE",
    "ProblemError",
    "ProblemResponse",
    "one_line",
    "problem_of",
    "problem_response",
]

PROBLEM_MEDIA_TYPE = "application/problem+json"
"""The media type of every error response."""

GENERIC_DETAIL = "the server failed to handle this request; the error was logged"
"""The detail of a 500: the cause stays in the server's log."""

_DETAIL_CHARS = 2_000
"""A detail longer than this is cut: a problem is one readable line, not a copy of the input."""

_log = logging.getLogger(__name__)


def one_line(text: str) -> str:
    """``text`` on one line (each line break becomes a space; other spaces stay, as a value
    shown in it may hold them), cut to a readable length."""
    flat = " ".join(text.splitlines())
    return flat if len(flat) <= _DETAIL_CHARS else flat[: _DETAIL_CHARS - 1] + "…"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class ProblemError(Exception):
    """A request the API refuses: the HTTP ``status``, a one-line ``detail`` and the ``field``."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Keep ``detail`` on one line; ``field`` names the request part at fault, if one is."""
        self.status = status
        self.detail = one_line(detail)
        self.field = field
        self.headers = dict(headers or {})
        super().__init__(self.detail)

    def to_json(self) -> dict[str, Any]:
        """The problem document: type, title (the HTTP reason), status, detail, field."""
        document: dict[str, Any] = {
            "type": "about:blank",
            "title": _reason(self.status),
            "status": self.status,
            "detail": self.detail,
        }
        if self.field is not None:
            document["field"] = self.field
        return document


class ProblemResponse(JSONResponse):
    """A JSON response sent as ``application/problem+json``."""

    media_type = PROBLEM_MEDIA_TYPE


def problem_response(problem: ProblemError) -> Response:
    """The response that carries ``problem``."""
    return ProblemResponse(problem.to_json(), status_code=problem.status, headers=problem.headers)


def problem_of(error: BaseException, *, field: str | None = None) -> ProblemError:
    """The problem an error raised while serving stands for (500 for anything unexpected).

    A caller's bad value (``InvalidInputError``) is 422 with the error's own one-line message;
    a locked or unreachable memory store, or a state store that failed, is 503 (its message
    masked of secrets once more).
    """
    if isinstance(error, ProblemError):
        return error
    if isinstance(error, InvalidInputError):
        return ProblemError(422, redact(str(error)), field=field)
    if isinstance(error, StoreLockedError | StoreUnavailableError | StateStoreError):
        return ProblemError(503, redact(str(error)))
    _log.error(
        "unexpected %s while serving: %s", type(error).__name__, redact(str(error))[:_DETAIL_CHARS]
    )
    return ProblemError(500, GENERIC_DETAIL)


async def handle_problem(request: Request, error: Exception) -> Response:
    """Starlette exception handler: any error becomes its problem response."""
    return problem_response(problem_of(error))


async def handle_http_exception(request: Request, error: Exception) -> Response:
    """Starlette exception handler: routing's 404 and 405 become problem documents."""
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        detail = f"no such endpoint: {request.method} {request.url.path}"
    elif error.status_code == 405:
        allowed = next(
            (value for name, value in (error.headers or {}).items() if name.lower() == "allow"),
            "",
        )
        detail = f"method {request.method} is not allowed on {request.url.path}" + (
            f" (allowed: {allowed})" if allowed else ""
        )
    else:
        detail = str(error.detail)
    return problem_response(ProblemError(error.status_code, detail, headers=error.headers))
