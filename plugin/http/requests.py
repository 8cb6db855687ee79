"""Reading a request: its JSON body, its path segments and its query parameters, each checked.

Every refusal is a ``ProblemError`` naming the part at fault: 415 for a body that is not
``application/json``, 413 for one over ``MAX_BODY_BYTES``, 400 for one that is not JSON (a
repeated key included: a parser would silently keep the last), and 422 for a value of the
wrong type or range, with the field and the value. NaN and the infinities are read as numbers,
so the field's own check refuses them by name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from starlette.requests import Request

from affect_memory.http.problems import ProblemError
from affect_memory.jsonl import DuplicateKeyError, loads_strict
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.export import DEFAULT_LIST_LIMIT, check_page
from affect_memory.memory.records import check_identifier
from affect_memory.memory.results import check_user

__all__ = [
    "MAX_BODY_BYTES",
    "check_fields",
    "json_body",
    "json_object",
    "memory_id_of",
    "page_of",
    "query_parameters",
    "user_id_of",
]

MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body read (8 MiB: a thousand records of the longest text, with room)."""

JSON_MEDIA_TYPE = "application/json"
"""The one media type request bodies are read in."""


async def json_body(request: Request, *, limit: int = MAX_BODY_BYTES) -> Any:
    """The request's body parsed as strict JSON; 415, 413 or 400 as a problem otherwise."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        given = shown(media_type) if media_type else "none"
        raise ProblemError(
            415,
            f"Content-Type must be {JSON_MEDIA_TYPE}, got {given}",
            field="Content-Type",
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise ProblemError(400, "body: empty; expected a JSON object", field="body")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProblemError(
            400,
            f"body: not UTF-8 (byte 0x{raw[error.start]:02x} at byte {error.start + 1})",
            field="body",
        ) from None
    try:
        return loads_strict(text, non_finite=True)
    except DuplicateKeyError as error:
        raise ProblemError(
            400, f"body: invalid JSON: {error} (a parser would keep only the last)", field="body"
        ) from None
    except ValueError as error:  # json.JSONDecodeError included
        raise ProblemError(400, f"body: invalid JSON: {error}", field="body") from None


def _too_large(size: int, limit: int) -> ProblemError:
    return ProblemError(
        413, f"body: {size:,} bytes or more is over the limit of {limit:,} bytes", field="body"
    )


async def json_object(request: Request, fields: Collection[str]) -> dict[str, Any]:
    """The body as a JSON object whose keys are all among ``fields`` (422 otherwise)."""
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ProblemError(422, f"body must be a JSON object, got {shown(body)}", field="body")
    check_fields(body, fields, where="")
    return body


def check_fields(value: Mapping[str, Any], fields: Collection[str], *, where: str) -> None:
    """Refuse (422) a key of ``value`` not among ``fields``, naming ``where`` and the key."""
    for key in value:
        if key not in fields:
            name = f"{where}.{key}" if where else key
            raise ProblemError(
                422,
                f"{name} is not a field here (known: {', '.join(fields)}), got "
                f"{shown(value[key])}",
                field=name,
            )


def user_id_of(request: Request) -> str:
    """The path's ``user_id``, checked as every read and write checks it (422 otherwise)."""
    try:
        return check_user(request.path_params["user_id"])
    except InvalidInputError as error:
        raise ProblemError(422, str(error), field="user_id") from None


def memory_id_of(request: Request) -> str:
    """The path's ``memory_id``: 1-512 characters, no NUL (422 otherwise)."""
    try:
        return check_identifier(request.path_params["memory_id"], "memory_id")
    except ValueError as error:
        raise ProblemError(422, str(error), field="memory_id") from None


def query_parameters(request: Request, names: Collection[str]) -> dict[str, str]:
    """The query string's parameters, each among ``names`` and given once (422 otherwise)."""
    found: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name not in names:
            raise ProblemError(
                422,
                f"{shown(name)} is not a query parameter here (known: {', '.join(names)})",
                field=name,
            )
        if name in found:
            raise ProblemError(422, f"{name} is given twice", field=name)
        found[name] = value
    return found


def _integer(parameters: Mapping[str, str], name: str, default: int) -> int:
    text = parameters.get(name)
    if text is None:
        return default
    stripped = text.strip()
    if not stripped.lstrip("-").isdigit() or len(stripped) > 18 or stripped != text:
        raise ProblemError(422, f"{name} must be an integer, got {shown(text)}", field=name)
    return int(stripped)


def page_of(parameters: Mapping[str, str]) -> tuple[int, int]:
    """``offset`` (≥ 0, default 0) and ``limit`` (1 to 1,000, default 50) of a list, checked
    by the store's own ``check_page`` (422 naming the parameter otherwise)."""
    offset = _integer(parameters, "offset", 0)
    limit = _integer(parameters, "limit", DEFAULT_LIST_LIMIT)
    try:
        check_page(limit, offset)
    except InvalidInputError as error:
        message = str(error)
        raise ProblemError(422, message, field=message.split(" ", 1)[0]) from None
    return offset, limit
