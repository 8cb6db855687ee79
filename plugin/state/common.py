"""What both state stores write and read the same way: the state envelope, messages, outbox
payloads, and the bookkeeping of a held transaction.

A state row holds ``{"version": 1, "state": {...}}``; a row that fails to read back raises
``CorruptStateError`` naming the conversation, never a default. An outbox payload must be JSON
nested at most 100 levels, so that it can always be read back.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self

from pydantic import ValidationError

from affect_memory.kernel.adapters.store_support import HeldTransaction
from affect_memory.kernel.errors import CorruptStateError, InvalidInputError, shown
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.parameters import describe_first_error
from affect_memory.kernel.protocols import Message, OutboxItem

__all__ = [
    "MAX_PAYLOAD_DEPTH",
    "STATE_FORMAT_VERSION",
    "ClosingStore",
    "WorkerTransaction",
    "check_topic",
    "decode_item",
    "decode_messages",
    "decode_state",
    "encode_payload",
    "encode_state",
    "when_done",
]

STATE_FORMAT_VERSION = 1
"""Version of the ``{"version": ..., "state": ...}`` JSON envelope a state row holds."""

MAX_PAYLOAD_DEPTH = 100
"""Deepest nesting of lists and objects an outbox payload may have; deeper is refused."""


def encode_state(state: AffectState) -> str:
    """The state row's text: the versioned envelope around the state's JSON."""
    return f'{{"version":{STATE_FORMAT_VERSION},"state":{state.model_dump_json()}}}'


def decode_state(conversation_id: str, text: object) -> AffectState:
    """Validate a stored state envelope; any problem names the conversation."""
    where = f"stored state of conversation {shown(conversation_id)}"
    try:
        envelope: Any = json.loads(text)  # type: ignore[arg-type]
    except RecursionError:
        raise CorruptStateError(f"{where} is nested too deeply to read") from None
    except TypeError:
        raise CorruptStateError(f"{where} is not text but {type(text).__name__}") from None
    except ValueError as error:
        raise CorruptStateError(f"{where} is not valid JSON: {error}") from error
    if not isinstance(envelope, dict) or set(envelope) != {"version", "state"}:
        raise CorruptStateError(f'{where} is not a {{"version": ..., "state": ...}} envelope')
    version = envelope["version"]
    if type(version) is not int or version != STATE_FORMAT_VERSION:  # not true, not 1.0
        raise CorruptStateError(
            f"{where} has format version {shown(version)}; this affect-memory reads "
            f"version {STATE_FORMAT_VERSION} (an integer)"
        )
    try:
        return AffectState.model_validate(envelope["state"])
    except ValidationError as error:
        raise CorruptStateError(
            f"{where} failed validation: {_one_line('state', error)}"
        ) from None


def decode_messages(conversation_id: str, rows: Iterable[Sequence[Any]]) -> tuple[Message, ...]:
    """Validate ``(seq, role, content, timestamp)`` rows; a problem names the message and the
    conversation."""
    messages: list[Message] = []
    for seq, role, content, timestamp in rows:
        try:
            messages.append(
                Message.model_validate({"role": role, "content": content, "timestamp": timestamp})
            )
        except ValidationError as error:
            raise CorruptStateError(
                f"message {seq} of conversation {shown(conversation_id)} cannot be read: "
                f"{_one_line('message', error)}"
            ) from None
    return tuple(messages)


def _one_line(root: str, error: ValidationError) -> str:
    """A validation error's first problem on one line, naming the field under ``root``."""
    detail = describe_first_error(error).replace("\n", " ")
    return f"{root}{detail}" if detail.startswith(("[", ".")) else f"{root}: {detail}"


def _nested_deeper_than(value: object, limit: int) -> bool:
    """Whether lists and dicts nest more than ``limit`` levels in ``value`` (no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[object]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def encode_payload(item: OutboxItem, index: int) -> str:
    """An outbox item's payload as JSON text; refused, naming the item, when it could not be
    read back (not serializable, or nested too deeply)."""
    if _nested_deeper_than(item.payload, MAX_PAYLOAD_DEPTH):
        raise InvalidInputError(
            f"outbox[{index}] ({shown(item.id)}) payload is nested more than "
            f"{MAX_PAYLOAD_DEPTH} levels deep, too deep to read back"
        )
    try:
        return json.dumps(item.payload, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(
            f"outbox[{index}] ({shown(item.id)}) payload is not JSON-serializable: {error}"
        ) from None


def decode_item(item_id: object, topic: object, payload: object) -> OutboxItem:
    """Read one outbox row back; a problem raises ``CorruptStateError`` saying what it is."""
    try:
        decoded: Any = json.loads(payload)  # type: ignore[arg-type]
    except RecursionError:
        raise CorruptStateError("its payload is nested too deeply to read") from None
    except TypeError:
        raise CorruptStateError(f"its payload is not text but {type(payload).__name__}") from None
    except ValueError as error:
        raise CorruptStateError(f"its payload is not valid JSON: {error}") from None
    if not isinstance(decoded, dict):
        raise CorruptStateError(f"its payload is not a JSON object but {shown(decoded)}")
    try:
        return OutboxItem(id=item_id, topic=topic, payload=decoded)  # type: ignore[arg-type]
    except ValidationError as error:
        raise CorruptStateError(f"it is not a valid outbox item: {error}") from None


def check_topic(topic: object) -> str:
    """An outbox topic asked for: a string."""
    if not isinstance(topic, str):
        raise InvalidInputError(f"topic must be a string, got {shown(topic)}")
    return topic


def when_done(work: Sequence[concurrent.futures.Future[Any]], then: Callable[[], None]) -> None:
    """Call ``then`` now, or once the last unfinished future of ``work`` has finished."""
    pending = [future for future in work if not future.done()]
    if not pending:
        then()
        return
    remaining = [len(pending)]
    guard = threading.Lock()

    def finished(_: concurrent.futures.Future[Any]) -> None:
        with guard:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            then()

    for future in pending:
        future.add_done_callback(finished)


class WorkerTransaction(HeldTransaction):
    """A held transaction whose calls run in worker threads: the conversation stays held until
    the last of them has finished, even when its caller was cancelled."""

    def __init__(self, conversation_id: str) -> None:
        """A transaction on ``conversation_id`` with no call made yet."""
        super().__init__(conversation_id)
        self.in_flight: list[concurrent.futures.Future[Any]] = []
        """Worker-thread calls of this transaction; the lock is kept until they finish."""

    def _last_call_failed(self) -> bool:
        """Whether the latest worker call ended with an error (so nothing was written)."""
        future = self.in_flight[-1]
        return future.done() and not future.cancelled() and future.exception() is not None


class ClosingStore:
    """A store used as ``async with store:``, closed on the way out."""

    def close(self) -> None:
        """Release what the store holds; it cannot be used afterwards."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
