"""``POST /v1/users/{user_id}/recall``: one query ranked over the user's memories.

The answer is ``RecallResult.to_json()``, the very function ``affect-memory recall --json`` and
the MCP ``recall`` tool print with, from ``ChromaMemory.recall`` called with the request's
arguments; so the API, the CLI and Python give the same hits, scores and explanations. Every
argument is checked here first, in the words of the store's own checks, so a bad one is a 422
naming its field and nothing reaches the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from affect_memory.http.context import ServerContext
from affect_memory.http.problems import ProblemError
from affect_memory.http.requests import check_fields, json_object, user_id_of
from affect_memory.kernel.bounds import check_number
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.parameters import first_message
from affect_memory.kernel.retrieval import RetrievalWeights
from affect_memory.memory.filters import MemoryFilter, parse_where
from affect_memory.memory.results import check_query, check_top_k
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, RecallSettings
from affect_memory.memory.timestamps import normalize_timestamp

__all__ = ["RECALL_FIELDS", "RecallArguments", "parse_recall", "parse_settings", "recall_routes"]

RECALL_FIELDS = ("query", "top_k", "now", "mood_valence", "where", "settings")
"""The fields of a recall request: ``query`` is required."""

SETTING_FIELDS = tuple(RecallSettings.model_fields)
WEIGHT_FIELDS = tuple(RetrievalWeights.model_fields)


def _refused(error: ValidationError, where: str) -> ProblemError:
    """A settings validation error as a 422 naming ``where.field``."""
    message = first_message(error)
    loc = [str(part) for part in error.errors()[0].get("loc", ())]
    field = ".".join([where, *loc]) if loc else where
    for model in ("RecallSettings.", "RetrievalWeights."):
        message = message.replace(model, f"{where}.", 1)
    return ProblemError(422, message if message.startswith(where) else f"{where}: {message}",
                        field=field)


def parse_settings(value: object) -> RecallSettings:
    """A ``RecallSettings`` from a partial tree (``{"ranking": ..., "weights": {...}}``); what it
    leaves out keeps the defaults recall uses."""
    if not isinstance(value, Mapping):
        raise ProblemError(
            422, f"settings must be an object of recall settings, got {shown(value)}",
            field="settings",
        )
    check_fields(value, SETTING_FIELDS, where="settings")
    weights = value.get("weights", {})
    if not isinstance(weights, Mapping):
        raise ProblemError(
            422, f"settings.weights must be an object of ranking weights, got {shown(weights)}",
            field="settings.weights",
        )
    check_fields(weights, WEIGHT_FIELDS, where="settings.weights")
    base = DEFAULT_RECALL_SETTINGS
    try:
        checked = RetrievalWeights.model_validate({**base.weights.model_dump(), **weights})
    except ValidationError as error:
        raise _refused(error, "settings.weights") from None
    chosen = {key: item for key, item in value.items() if key != "weights"}
    try:
        return RecallSettings.model_validate(
            {**base.model_dump(exclude={"weights"}), **chosen, "weights": checked}
        )
    except ValidationError as error:
        raise _refused(error, "settings") from None


@dataclass(frozen=True, slots=True)
class RecallArguments:
    """A recall request's checked arguments, as ``ChromaMemory.recall`` takes them
    (``parse_recall`` is what checks them)."""

    query: str
    top_k: int
    now: datetime | None
    mood_valence: float
    where: MemoryFilter | None
    settings: RecallSettings | None


def parse_recall(body: Mapping[str, Any]) -> RecallArguments:
    """The arguments of a recall body, each checked by the store's own check (422 naming the
    field and the value otherwise)."""
    if "query" not in body:
        raise ProblemError(422, "query is required: the text to recall memories for", field="query")
    try:
        query = check_query(body["query"])
    except ValueError as error:
        raise ProblemError(422, f"query {error}", field="query") from None
    try:
        top_k = check_top_k(body.get("top_k", 6))
    except InvalidInputError as error:
        raise ProblemError(422, str(error), field="top_k") from None
    now: datetime | None = None
    if body.get("now") is not None:
        given = body["now"]
        if not isinstance(given, str):
            raise ProblemError(
                422, f"now must be an ISO-8601 string with a UTC offset, got {shown(given)}",
                field="now",
            )
        try:
            now = normalize_timestamp(given, field="now").moment
        except InvalidInputError as error:
            raise ProblemError(422, str(error), field="now") from None
    try:
        mood = check_number(body.get("mood_valence", 0.0), -1.0, 1.0)
    except ValueError as error:
        raise ProblemError(422, f"mood_valence {error}", field="mood_valence") from None
    try:
        where = parse_where(body.get("where"))
    except InvalidInputError as error:
        raise ProblemError(422, str(error), field="where") from None
    settings = parse_settings(body["settings"]) if body.get("settings") is not None else None
    return RecallArguments(
        query, top_k=top_k, now=now, mood_valence=mood, where=where, settings=settings
    )


def recall_routes(context: ServerContext) -> list[BaseRoute]:
    """The recall route."""

    async def recall(request: Request) -> Response:
        user_id = user_id_of(request)
        arguments = parse_recall(await json_object(request, RECALL_FIELDS))
        result = await context.call(
            context.memory.recall,
            arguments.query,
            user_id,
            mood_valence=arguments.mood_valence,
            now=arguments.now,
            top_k=arguments.top_k,
            settings=arguments.settings,
            where=arguments.where,
        )
        return JSONResponse(result.to_json())

    return [Route("/v1/users/{user_id}/recall", recall, methods=["POST"])]
