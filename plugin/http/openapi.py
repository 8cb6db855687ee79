"""The API described as an OpenAPI 3.1 document, built from the modules that define the API.

The document is data written here, not inferred from the routes, so it can say what a route's
code cannot: the problem format, the bounds of each field, which errors each route answers.
The field lists come from the modules that check them (``RECORD_FIELDS``, ``RECALL_FIELDS``,
``RecallSettings``), so a field added there without being described here fails the tests. A
copy is checked in at ``docs/reference/openapi.json``; ``affect-memory serve --print-openapi``
prints it, and a test fails when the served document differs from the copy.
"""

from __future__ import annotations

from typing import Any

from affect_memory.http.exposure import DEFAULT_HOST, DEFAULT_PORT
from affect_memory.kernel import __version__
from affect_memory.kernel.bounds import MAX_CONVERSATION_ID_CHARS
from affect_memory.kernel.models import MAX_TEXT_CHARS
from affect_memory.kernel.retrieval import RetrievalWeights
from affect_memory.memory.export import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT
from affect_memory.memory.records import MAX_EXTRA_KEYS, MAX_ID_CHARS
from affect_memory.memory.results import MAX_TOP_K
from affect_memory.memory.settings import RecallSettings

__all__ = ["openapi_document"]

_NUMBER: dict[str, Any] = {"type": "number"}
_INTEGER: dict[str, Any] = {"type": "integer"}
_STRING: dict[str, Any] = {"type": "string"}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(properties: dict[str, Any], *required: str, closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


def _bounded(low: float, high: float) -> dict[str, Any]:
    return {"type": "number", "minimum": low, "maximum": high}


_IDENTIFIER: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}
_SCALAR: dict[str, Any] = {"type": ["string", "integer", "number", "boolean"]}
_METADATA: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_EXTRA_KEYS,
    "additionalProperties": _SCALAR,
    "description": "Custom scalar metadata (a record's ``extra``); filter on it in recall's "
    "``where`` as ``extra.KEY``.",
}
_MOOD = _object({"pleasure": _NUMBER, "arousal": _NUMBER, "dominance": _NUMBER})
_EMOTIONS: dict[str, Any] = {"type": "object", "additionalProperties": _NUMBER}


def _schemas() -> dict[str, Any]:
    memory_fields: dict[str, Any] = {
        "id": _IDENTIFIER,
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
        "timestamp": {**_TIME, "description": "ISO 8601 with a UTC offset (or epoch seconds)"},
        "significance": _bounded(0, 1),
        "valence": _bounded(-1, 1),
        "episode": {"type": "boolean"},
        "agent_id": _IDENTIFIER,
        "conversation_id": _IDENTIFIER,
        "metadata": _METADATA,
    }
    weights: dict[str, Any] = {name: _NUMBER for name in RetrievalWeights.model_fields}
    settings: dict[str, Any] = {
        name: _NUMBER for name in RecallSettings.model_fields if name != "weights"
    }
    settings.update(
        ranking={"enum": ["hybrid", "dense"]},
        dense_candidates=_INTEGER,
        dated_dense_candidates=_INTEGER,
        lexical_candidates=_INTEGER,
        anchor_members=_INTEGER,
        weights=_object(weights),
    )
    hit: dict[str, Any] = {
        "id": _STRING,
        "text": _STRING,
        "score": _NUMBER,
        "distance": _NUMBER,
        "similarity": _NUMBER,
        "recency": _NUMBER,
        "salience": _NUMBER,
        "congruence": _NUMBER,
        "episode": _NUMBER,
        "timestamp": _nullable(_STRING),
        "significance": _NUMBER,
        "recall_count": _INTEGER,
        "emotional_valence": _NUMBER,
        "relevance": _nullable({"type": "object"}),
        "age_days": _nullable(_NUMBER),
        "calendar_age_days": _nullable(_NUMBER),
        "time_rule": {**_STRING, "description": "One line: why the memory is aged as it is."},
        "last_recalled_at": _nullable(_STRING),
        "plan": _nullable(_STRING),
    }
    return {
        "Problem": _object(
            {
                "type": {"const": "about:blank"},
                "title": {**_STRING, "description": "The HTTP reason phrase."},
                "status": _INTEGER,
                "detail": {**_STRING, "description": "One line naming the field and the value."},
                "field": {**_STRING, "description": "The request part at fault, e.g. "
                          "records[0].timestamp."},
            },
            "type", "title", "status", "detail",
        ),
        "Health": _object({"status": {"const": "ok"}, "version": _STRING}, "status", "version"),
        "Stats": _object(
            {
                "location": _STRING,
                "collection": _STRING,
                "collections": _INTEGER,
                "space": _STRING,
                "hnsw": {"type": "object"},
                "embedder": _nullable(_STRING),
                "count": _INTEGER,
                "users": {"type": "object", "additionalProperties": _INTEGER},
                "size_bytes": _nullable(_INTEGER),
            }
        ),
        "UserList": _object(
            {"users": {"type": "array", "items": _object(
                {"user_id": _STRING, "memories": _INTEGER}, "user_id", "memories")}},
            "users",
        ),
        "MemoryInput": _object(memory_fields, "text"),
        "MemoryBatch": _object(
            {
                "records": {"type": "array", "items": _ref("MemoryInput"), "minItems": 1,
                            "maxItems": 1000},
                "upsert": {"type": "boolean", "default": False},
            },
            "records",
        ),
        "WriteResult": _object(
            {"ids": {"type": "array", "items": _STRING}, "written": _INTEGER,
             "skipped": {"type": "array", "items": _STRING,
                         "description": "Ids the user already had (left untouched, no upsert)."}},
            "ids", "written", "skipped",
        ),
        "Memory": _object(
            {**memory_fields, "agent_id": _nullable(_IDENTIFIER),
             "conversation_id": _nullable(_IDENTIFIER), "recall_count": _INTEGER,
             "last_recalled_at": _nullable(_STRING)},
            "id", "text", "timestamp", "significance", "valence", "recall_count", "metadata",
        ),
        "MemoryPage": _object(
            {"memories": {"type": "array", "items": _ref("Memory")}, "total": _INTEGER,
             "offset": _INTEGER, "limit": _INTEGER},
            "memories", "total", "offset", "limit",
        ),
        "Forgotten": _object({"forgotten": {"type": "array", "items": _STRING}}, "forgotten"),
        "RecallSettings": _object(settings),
        "RecallRequest": _object(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 6},
                "now": {**_TIME, "description": "When to score recency at, with a UTC offset "
                        "(default: the time of the request)"},
                "mood_valence": {**_bounded(-1, 1), "default": 0},
                "where": {"type": "object", "description": "Fields agent_id, conversation_id, "
                          "extra.KEY; a scalar, {\"$eq\": v} or {\"$in\": [...]}; all must hold."},
                "settings": _ref("RecallSettings"),
            },
            "query",
        ),
        "RecallHit": _object(hit),
        "RecallResult": _object(
            {
                "query": _STRING,
                "user_id": _STRING,
                "now": _STRING,
                "plan": _nullable({"type": "object", "description": "What the query was read "
                                   "as asking: kind, reason, subject, tense, cues, period."}),
                "results": {"type": "array", "items": _ref("RecallHit")},
                "skipped": {"type": "array", "items": _STRING},
            },
            "query", "user_id", "now", "plan", "results", "skipped",
        ),
        "ExportedRecord": {"type": "object", "description": "One line of the export: a record "
                           "as `affect-memory ingest` reads it back."},
        "Erasure": _object(
            {"user_id": _STRING, "memories": _INTEGER, "state": _object(
                {"conversations": {"type": "array", "items": _STRING}, "messages": _INTEGER,
                 "outbox_items": _INTEGER})},
            "user_id", "memories", "state",
        ),
        "ConversationList": _object(
            {"conversations": {"type": "array", "items": _object(
                {"conversation_id": _STRING, "turns": _INTEGER, "updated_at": _nullable(_STRING)},
                closed=False)}},
            "conversations", closed=False,
        ),
        "Conversation": _object(
            {"conversation_id": _STRING, "user_id": _STRING, "turns": {"type": "array",
             "items": _object({"index": _INTEGER, "timestamp": _nullable(_STRING), "user": _STRING,
                               "assistant": _STRING, "mood": _nullable(_MOOD),
                               "emotions": _EMOTIONS},
                              closed=False)}},
            "conversation_id", "user_id", "turns", closed=False,
        ),
        "TurnRequest": _object({"message": _STRING, "now": _TIME}, "message"),
        "TurnReply": _object(
            {"reply": _STRING, "mood": _MOOD, "emotions": _EMOTIONS,
             "retrieved": {"type": "array", "items": _STRING}, "turn": _nullable(_INTEGER)},
            "reply", "mood", "emotions", "retrieved", "turn", closed=False,
        ),
    }


def _parameter(name: str, where: str, schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema,
            "description": text}


_USER = _parameter("user_id", "path", _IDENTIFIER, "Whose data: every call is scoped to one user.")
_MEMORY = _parameter("memory_id", "path", _IDENTIFIER, "A memory id of that user.")
_CONVERSATION = _parameter(
    "conversation_id",
    "path",
    {"type": "string", "minLength": 1, "maxLength": MAX_CONVERSATION_ID_CHARS},
    "A conversation of that user.",
)


def _operation(
    summary: str,
    answer: tuple[int, str, str | None],
    problems: tuple[int, ...],
    *,
    parameters: tuple[dict[str, Any], ...] = (),
    body: str | None = None,
    media: str = "application/json",
) -> dict[str, Any]:
    status, description, schema = answer
    content = {} if schema is None else {"content": {media: {"schema": _ref(schema)}}}
    responses: dict[str, Any] = {str(status): {"description": description, **content}}
    for code in sorted({*problems, 401, 500}):
        responses[str(code)] = {"$ref": "#/components/responses/Problem"}
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    if parameters:
        operation["parameters"] = list(parameters)
    if body is not None:
        operation["requestBody"] = {
            "required": True, "content": {"application/json": {"schema": _ref(body)}}
        }
    return operation


_BODY_PROBLEMS = (400, 413, 415, 422, 504)


def _paths() -> dict[str, Any]:
    page = (
        _parameter("offset", "query", {"type": "integer", "minimum": 0, "default": 0},
                   "Memories to skip, newest first."),
        _parameter("limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT,
                                      "default": DEFAULT_LIST_LIMIT}, "Memories per page."),
        _parameter("q", "query", {"type": "string", "minLength": 1}, "Only memories whose text "
                   "holds this, ignoring case."),
    )
    health = _operation("The server is up; never needs the token.", (200, "Up", "Health"), ())
    health["security"] = []
    return {
        "/": {"get": {"summary": "The inspector's page (only with --inspector).", "responses": {
            "200": {"description": "The page", "content": {"text/html": {}}},
            "404": {"$ref": "#/components/responses/Problem"}}}},
        "/inspector/{name}": {"get": {"summary": "A static asset of the inspector's page (only "
                                      "with --inspector).", "parameters": [_parameter(
                                          "name", "path", _STRING, "The asset's file name.")],
                                      "responses": {
            "200": {"description": "The asset"},
            "404": {"$ref": "#/components/responses/Problem"}}}},
        "/openapi.json": {"get": {"summary": "This document.", "responses": {
            "200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}}}},
        "/v1/health": {"get": health},
        "/v1/stats": {"get": _operation("The store's counts and settings.",
                                        (200, "Stats", "Stats"), (504,))},
        "/v1/users": {"get": _operation("Users with memories, and how many each has.",
                                        (200, "Users", "UserList"), (504,))},
        "/v1/users/{user_id}": {"delete": _operation(
            "Erase every memory and conversation of one user (no one else's).",
            (200, "What was erased", "Erasure"), (422, 504), parameters=(_USER,))},
        "/v1/users/{user_id}/export": {"get": _operation(
            "Every memory of the user, one JSON object per line.",
            (200, "The records", "ExportedRecord"), (422, 504), parameters=(_USER,),
            media="application/x-ndjson")},
        "/v1/users/{user_id}/memories": {
            "get": _operation("A page of the user's memories, newest first.",
                              (200, "The page", "MemoryPage"), (422, 504),
                              parameters=(_USER, *page)),
            "post": _operation("Store memories; the batch is checked whole, nothing is written "
                               "if any record is bad.", (201, "Stored", "WriteResult"),
                               _BODY_PROBLEMS, parameters=(_USER,), body="MemoryBatch"),
        },
        "/v1/users/{user_id}/memories/{memory_id}": {
            "get": _operation("One memory.", (200, "The memory", "Memory"), (404, 422, 504),
                              parameters=(_USER, _MEMORY)),
            "delete": _operation("Forget one memory.", (200, "Forgotten", "Forgotten"),
                                 (404, 422, 504), parameters=(_USER, _MEMORY)),
        },
        "/v1/users/{user_id}/recall": {"post": _operation(
            "The user's memories ranked for a query, each score explained (what "
            "`affect-memory recall --json` prints).", (200, "The ranking", "RecallResult"),
            _BODY_PROBLEMS, parameters=(_USER,), body="RecallRequest")},
        "/v1/users/{user_id}/conversations": {"get": _operation(
            "The user's conversations.", (200, "Conversations", "ConversationList"), (422, 504),
            parameters=(_USER,))},
        "/v1/users/{user_id}/conversations/{conversation_id}": {"get": _operation(
            "One conversation's committed turns, each with the mood after it.",
            (200, "The conversation", "Conversation"), (404, 422, 504),
            parameters=(_USER, _CONVERSATION))},
        "/v1/users/{user_id}/conversations/{conversation_id}/turns": {"post": _operation(
            "Run one turn through the engine with the server's model.",
            (200, "The turn", "TurnReply"), (*_BODY_PROBLEMS, 404, 502, 503),
            parameters=(_USER, _CONVERSATION), body="TurnRequest")},
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API, as served at ``/openapi.json``."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "affect-memory",
            "version": __version__,
            "description": "An affect-aware memory layer for AI agents over HTTP (`affect-memory "
            "serve`). Every error is an application/problem+json document.",
        },
        "servers": [{"url": f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"}],
        "security": [{}, {"bearer": []}],
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "responses": {"Problem": {
                "description": "The request was refused; `detail` says why in one line.",
                "content": {"application/problem+json": {"schema": _ref("Problem")}},
            }},
            "securitySchemes": {"bearer": {
                "type": "http", "scheme": "bearer",
                "description": "Required on every path but /v1/health (and the inspector's "
                "page and assets when it is served) when the server was started with --token "
                "(or $AFFECT_MEMORY_TOKEN).",
            }},
        },
    }
