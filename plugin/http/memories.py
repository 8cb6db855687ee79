"""One user's memories: post a batch, list a page newest first, read, forget one.

Every route reads the user from the path, so a request can only ever touch that user's
memories (ids are per user: the same id under another user is another memory).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from affect_memory.http.context import ServerContext
from affect_memory.http.memory_records import memory_json, parse_records
from affect_memory.http.problems import ProblemError
from affect_memory.http.requests import (
    json_object,
    memory_id_of,
    page_of,
    query_parameters,
    user_id_of,
)
from affect_memory.kernel.errors import shown
from affect_memory.memory.export import MAX_LIST_LIMIT
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import check_query
from affect_memory.memory.store import ChromaMemory

__all__ = ["memory_routes", "newest_first"]

POST_FIELDS = ("records", "upsert")
"""The fields of ``POST /v1/users/{user_id}/memories``."""

LIST_PARAMETERS = ("offset", "limit", "q")
"""The query parameters of ``GET /v1/users/{user_id}/memories``."""


def newest_first(
    memory: ChromaMemory, user_id: str, *, offset: int, limit: int, contains: str | None = None
) -> tuple[tuple[MemoryRecord, ...], int]:
    """A page of ``user_id``'s memories, newest timestamp first, and how many there are in all
    (of those whose text holds ``contains``, ignoring case, when given).

    The store lists oldest first, so the page is the mirror of the matching stretch of its
    order; a search reads every memory of the user, page by page.
    """
    if contains is None:
        total = memory.count(user_id)
        start = max(0, total - offset - limit)
        size = total - offset - start
        if size <= 0:
            return (), total
        return tuple(reversed(memory.list(user_id, limit=size, offset=start))), total
    needle = contains.casefold()
    matched: list[MemoryRecord] = []
    read = 0
    while True:
        page = memory.list(user_id, limit=MAX_LIST_LIMIT, offset=read)
        matched.extend(record for record in page if needle in record.text.casefold())
        read += MAX_LIST_LIMIT
        if len(page) < MAX_LIST_LIMIT:
            break
    matched.reverse()
    return tuple(matched[offset : offset + limit]), len(matched)


def memory_routes(context: ServerContext) -> list[BaseRoute]:
    """The routes under ``/v1/users/{user_id}/memories``."""

    async def memories(request: Request) -> Response:
        if request.method == "POST":
            return await _post(request)
        return await _list(request)

    async def _post(request: Request) -> Response:
        user_id = user_id_of(request)
        body = await json_object(request, POST_FIELDS)
        if "records" not in body:
            raise ProblemError(
                422, "records is required: a list of memory objects", field="records"
            )
        upsert = body.get("upsert", False)
        if not isinstance(upsert, bool):
            raise ProblemError(
                422, f"upsert must be true or false, got {shown(upsert)}", field="upsert"
            )
        records = parse_records(body["records"], user_id, now=datetime.now(UTC))
        write = context.memory.upsert if upsert else context.memory.add
        report = await context.call(write, records, progress=False)
        return JSONResponse(
            {
                "ids": [record.id for record in records],
                "written": report.written,
                "skipped": list(report.skipped),
            },
            status_code=201,
        )

    async def _list(request: Request) -> Response:
        user_id = user_id_of(request)
        parameters = query_parameters(request, LIST_PARAMETERS)
        offset, limit = page_of(parameters)
        contains = parameters.get("q")
        if contains is not None:
            try:
                check_query(contains)
            except ValueError as error:
                raise ProblemError(422, f"q {error}", field="q") from None
        page, total = await context.call(
            newest_first, context.memory, user_id, offset=offset, limit=limit, contains=contains
        )
        payload: dict[str, Any] = {
            "memories": [memory_json(record) for record in page],
            "total": total,
            "offset": offset,
            "limit": limit,
        }
        return JSONResponse(payload)

    async def memory(request: Request) -> Response:
        user_id = user_id_of(request)
        memory_id = memory_id_of(request)
        if request.method == "DELETE":
            removed = await context.call(context.memory.forget, [memory_id], user_id=user_id)
            if not removed:
                raise _absent(user_id, memory_id)
            return JSONResponse({"forgotten": list(removed)})
        found = await context.call(context.memory.get, [memory_id], user_id=user_id)
        if not found:
            raise _absent(user_id, memory_id)
        return JSONResponse(memory_json(found[0]))

    return [
        Route("/v1/users/{user_id}/memories", memories, methods=["GET", "POST"]),
        Route("/v1/users/{user_id}/memories/{memory_id:path}", memory, methods=["GET", "DELETE"]),
    ]


def _absent(user_id: str, memory_id: str) -> ProblemError:
    return ProblemError(
        404, f"memory_id {shown(memory_id)} is not a memory of user {shown(user_id)}",
        field="memory_id",
    )
