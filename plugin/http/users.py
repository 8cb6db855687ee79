"""Users as a whole: who has memories, one user's export, and erasing one user.

The export is what ``ChromaMemory.export`` yields, one JSON object per line
(``application/x-ndjson``), the lines ``affect-memory ingest`` reads back; the first page is
read before the answer starts, so an unusable store is still a problem document. Erasure
removes the user's conversations from the state store, then their memories, as
``affect-memory erase --state`` does, and reports both in that command's ``--json`` shape.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from itertools import islice
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from affect_memory.http.context import ServerContext
from affect_memory.http.requests import user_id_of
from affect_memory.memory.export import EXPORT_PAGE

__all__ = ["NDJSON_MEDIA_TYPE", "user_routes"]

NDJSON_MEDIA_TYPE = "application/x-ndjson"
"""The export's media type: one JSON object per line."""


def _line(record: dict[str, Any]) -> bytes:
    text = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def _next_page(lines: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(islice(lines, EXPORT_PAGE))


def user_routes(context: ServerContext) -> list[BaseRoute]:
    """The routes ``/v1/users``, ``/v1/users/{user_id}`` and its export."""

    async def users(request: Request) -> Response:
        stats = await context.call(context.memory.stats)
        listed = [{"user_id": user, "memories": held} for user, held in stats.users.items()]
        return JSONResponse({"users": listed})

    async def export(request: Request) -> Response:
        user_id = user_id_of(request)
        lines = await context.call(context.memory.export, user_id)
        first = await context.call(_next_page, lines)

        async def body() -> AsyncIterator[bytes]:
            page = first
            while page:
                yield b"".join(_line(record) for record in page)
                if len(page) < EXPORT_PAGE:
                    return
                page = await context.call(_next_page, lines)

        return StreamingResponse(body(), media_type=NDJSON_MEDIA_TYPE)

    async def erase(request: Request) -> Response:
        user_id = user_id_of(request)
        store = await context.call(context.state_store)
        state = await context.bounded(store.erase_user(user_id))
        report = await context.call(context.memory.erase_user, user_id)
        return JSONResponse(
            {
                "user_id": user_id,
                "memories": report.memories,
                "state": {
                    "conversations": list(state.conversations),
                    "messages": state.messages,
                    "outbox_items": state.outbox_items,
                },
            }
        )

    return [
        Route("/v1/users", users, methods=["GET"]),
        Route("/v1/users/{user_id}", erase, methods=["DELETE"]),
        Route("/v1/users/{user_id}/export", export, methods=["GET"]),
    ]
