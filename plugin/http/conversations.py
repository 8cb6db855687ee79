"""A user's conversations: the list, one conversation turn by turn with the mood after each
turn, and a new turn through ``AffectEngine`` with the server's model.

A conversation belongs to the users it is linked to (``affect_memory.state.user_links``); a
turn first claims a new conversation for its user. Another user's conversation, or one that
holds turns and belongs to nobody, answers 404 exactly as a missing one does, so no user learns
what another holds. A turn's body is checked before anything is written: a refused body
claims and commits nothing. A turn runs as ``affect-memory chat`` runs one (``user_engine``):
the user's memories are retrieved, the reply generated, the turn committed with its history
row, and the user's message becomes a memory through the outbox. The whole turn, the model's
time included, gets the server's ``timeout`` (then 504); a failing model answers 502.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from affect_memory.errors import LockTimeoutError, ModelAdapterError
from affect_memory.http.context import ServerContext
from affect_memory.http.problems import ProblemError
from affect_memory.http.requests import json_object, user_id_of
from affect_memory.kernel.bounds import check_conversation_id
from affect_memory.kernel.clock import utc_now
from affect_memory.kernel.engine_settings import DEFAULT_ENGINE_LIMITS
from affect_memory.kernel.errors import InvalidInputError, StateStoreError, shown
from affect_memory.kernel.models import Mood
from affect_memory.kernel.protocols import TurnResult
from affect_memory.memory.timestamps import normalize_timestamp
from affect_memory.memory.turns.user_engine import user_engine
from affect_memory.redaction import redact
from affect_memory.state.turn_history import ConversationHistory, ConversationTurn

__all__ = ["TURN_FIELDS", "conversation_routes", "pad_json", "turn_json"]

TURN_FIELDS = ("message", "now")
"""The fields a turn's body may have."""

_log = logging.getLogger(__name__)


def pad_json(mood: Mood) -> dict[str, float]:
    """A mood as the API shows it: pleasure (the kernel's valence), arousal, dominance."""
    return {"pleasure": mood.valence, "arousal": mood.arousal, "dominance": mood.dominance}


def turn_json(turn: ConversationTurn) -> dict[str, Any]:
    """One committed turn as ``GET .../conversations/{conversation_id}`` lists it; a turn not
    answered has the reply ``""``, as its own ``POST .../turns`` answer had."""
    return {
        "index": turn.index,
        "timestamp": turn.timestamp,
        "user": turn.user,
        "assistant": turn.assistant or "",
        "mood": None if turn.mood is None else pad_json(turn.mood),
        "emotions": dict(turn.emotions),
    }


def _conversation_id_of(request: Request) -> str:
    """The path's ``conversation_id``: 1-256 characters, not blank, no NUL (422 otherwise)."""
    given = request.path_params["conversation_id"]
    try:
        check_conversation_id(given)
    except InvalidInputError as error:
        raise ProblemError(422, str(error), field="conversation_id") from None
    if "\x00" in given:
        problem = f"conversation_id must not contain NUL, got {shown(given)}"
        raise ProblemError(422, problem, field="conversation_id")
    return str(given)


def _message_of(body: Mapping[str, Any]) -> str:
    """The turn's ``message``: a non-blank string within the engine's limit, without NUL."""
    if "message" not in body:
        raise ProblemError(422, "message is required (the user's message)", field="message")
    given = body["message"]
    limit = DEFAULT_ENGINE_LIMITS.max_message_chars
    if not isinstance(given, str):
        problem = f"message must be a string, got {shown(given)}"
    elif not given.strip():
        problem = f"message must not be empty or only whitespace, got {shown(given)}"
    elif len(given) > limit:
        problem = f"message has {len(given):,} characters; the limit is {limit:,}"
    elif "\x00" in given:
        problem = "message must not contain NUL characters"
    else:
        return given
    raise ProblemError(422, problem, field="message")


def _now_of(body: Mapping[str, Any]) -> datetime | None:
    """The turn's ``now`` (an ISO-8601 string with a UTC offset), or None for the clock's."""
    given = body.get("now")
    if given is None:
        return None
    if not isinstance(given, str):
        raise ProblemError(
            422, f"now must be an ISO-8601 string with a UTC offset, got {shown(given)}",
            field="now",
        )
    try:
        return normalize_timestamp(given, field="now").moment
    except InvalidInputError as error:
        raise ProblemError(422, str(error), field="now") from None


def _missing(user_id: str, conversation_id: str) -> ProblemError:
    """The one answer for a conversation this user may not see, whether or not it exists."""
    return ProblemError(
        404,
        f"user {shown(user_id)} has no conversation {shown(conversation_id)}",
        field="conversation_id",
    )


async def _history(context: ServerContext) -> ConversationHistory:
    """The server's state store, which lists and reads conversations."""
    store = await context.call(context.state_store)
    if not isinstance(store, ConversationHistory):
        raise ProblemError(501, "this server's state store keeps no conversation history")
    return store


async def _run_turn(
    context: ServerContext,
    store: Any,
    *,
    user_id: str,
    conversation_id: str,
    message: str,
    now: datetime | None,
) -> tuple[TurnResult, str]:
    """One engine turn with the server's model; the result and the turn's stored timestamp."""
    moments: list[datetime] = []

    def clock() -> datetime:
        moments.append(now if now is not None else utc_now())
        return moments[-1]

    try:
        model = context.model.build(await context.call(context.intent_gate))
    except InvalidInputError as error:
        detail = f"the server's model cannot be used: {redact(str(error))}"
        raise ProblemError(503, detail) from None
    engine = user_engine(
        context.memory, model, store, user_id=user_id, conversation_id=conversation_id, clock=clock
    )
    async with AsyncExitStack() as stack:
        if hasattr(model, "__aenter__"):
            await stack.enter_async_context(model)
        deadline = asyncio.timeout(context.timeout)
        try:
            async with deadline:
                result = await engine.turn(message)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise ProblemError(
                504,
                f"the turn did not finish within {context.timeout:g} s (--timeout); it was "
                "committed whole or not at all: read the conversation to see which",
            ) from None
        except ModelAdapterError as error:
            raise ProblemError(
                502, f"the model failed, so the turn was not committed: {redact(str(error))}"
            ) from None
        except LockTimeoutError as error:
            raise ProblemError(503, redact(str(error)), field="conversation_id") from None
        except StateStoreError as error:
            _log.warning("a turn's commit failed: %s", redact(str(error)))
            raise ProblemError(503, f"the state store failed: {redact(str(error))}") from None
    # The engine stamps the turn's messages with its clock's moment in UTC.
    return result, moments[-1].astimezone(UTC).isoformat()


def _index_of(turns: tuple[ConversationTurn, ...] | None, message: str, stamp: str) -> int | None:
    """The index of the newest stored turn with this message and timestamp."""
    for turn in reversed(turns or ()):
        if turn.user == message and turn.timestamp == stamp:
            return turn.index
    return None


def conversation_routes(context: ServerContext) -> list[BaseRoute]:
    """The routes under ``/v1/users/{user_id}/conversations``."""

    async def listing(request: Request) -> Response:
        user_id = user_id_of(request)
        store = await _history(context)
        found = await context.bounded(store.conversations(user_id))
        return JSONResponse(
            {
                "conversations": [
                    {
                        "conversation_id": summary.conversation_id,
                        "turns": summary.turns,
                        "updated_at": summary.updated_at,
                    }
                    for summary in found
                ]
            }
        )

    async def conversation(request: Request) -> Response:
        user_id, conversation_id = user_id_of(request), _conversation_id_of(request)
        store = await _history(context)
        turns = await context.bounded(store.conversation_turns(user_id, conversation_id))
        if turns is None:
            raise _missing(user_id, conversation_id)
        return JSONResponse(
            {
                "conversation_id": conversation_id,
                "user_id": user_id,
                "turns": [turn_json(turn) for turn in turns],
            }
        )

    async def turn(request: Request) -> Response:
        user_id, conversation_id = user_id_of(request), _conversation_id_of(request)
        body = await json_object(request, TURN_FIELDS)
        message, now = _message_of(body), _now_of(body)
        store = await _history(context)
        if not await context.bounded(store.claim_conversation(conversation_id, user_id)):
            raise _missing(user_id, conversation_id)
        result, stamp = await _run_turn(
            context,
            store,
            user_id=user_id,
            conversation_id=conversation_id,
            message=message,
            now=now,
        )
        turns = await context.bounded(store.conversation_turns(user_id, conversation_id))
        return JSONResponse(
            {
                "reply": result.text,
                "mood": pad_json(result.mood),
                "emotions": dict(result.emotions),
                "retrieved": [scored.candidate.id for scored in result.memories],
                "turn": _index_of(turns, message, stamp),
            }
        )

    base = "/v1/users/{user_id}/conversations"
    return [
        Route(base, listing, methods=["GET"]),
        Route(base + "/{conversation_id}", conversation, methods=["GET"]),
        Route(base + "/{conversation_id}/turns", turn, methods=["POST"]),
    ]
