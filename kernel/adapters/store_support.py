"""What every state store shares: nested-hold detection, commit arguments, outbox ids.

Conversation ids and limits are checked by ``affect_memory.kernel.bounds`` (the engine checks them
too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import NamedTuple

from affect_memory.kernel.errors import InvalidInputError, StateStoreError, shown
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import Message, OutboxItem

__all__ = [
    "HeldTransaction",
    "PreparedCommit",
    "check_outbox_ids",
    "holding",
    "prepare_commit",
]

_HELD: ContextVar[frozenset[tuple[str, str]]] = ContextVar(
    "affect_memory_held_conversations", default=frozenset()
)


@contextmanager
def holding(backing: str, conversation_id: str) -> Iterator[None]:
    """Mark a conversation held by the current task; a nested hold raises instead of deadlocking.

    ``backing`` names the data behind the store (a file path, an object id), so two store
    handles on one database count as the same conversation.
    """
    key = (backing, conversation_id)
    held = _HELD.get()
    if key in held:
        raise StateStoreError(
            f"this task already holds a transaction on conversation {conversation_id!r}; "
            "a nested one would wait for itself forever (finish the turn first)"
        )
    token = _HELD.set(held | {key})
    try:
        yield
    finally:
        _HELD.reset(token)


class PreparedCommit(NamedTuple):
    """Commit arguments after checking: messages stamped, outbox de-duplicated by id."""

    state: AffectState | None
    messages: tuple[Message, ...]
    outbox: tuple[OutboxItem, ...]


def check_outbox_ids(ids: object) -> list[str]:
    """The outbox ids of a sequence, each a string (one string is not a sequence of ids)."""
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise InvalidInputError(f"ids must be a sequence of ids, got {shown(ids)}")
    for item_id in ids:
        if not isinstance(item_id, str):
            raise InvalidInputError(f"outbox ids must be strings, got {shown(item_id)}")
    return list(ids)


def prepare_commit(
    state: object,
    messages: object,
    outbox: object,
    now: datetime,
) -> PreparedCommit:
    """Check commit arguments and stamp unstamped messages with ``now`` in UTC.

    Raises ``InvalidInputError`` naming the bad argument before anything is written.
    """
    if state is not None and not isinstance(state, AffectState):
        raise InvalidInputError(f"state must be AffectState or None, got {type(state).__name__}")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise InvalidInputError(f"messages must be a sequence, got {type(messages).__name__}")
    if not isinstance(outbox, Sequence) or isinstance(outbox, str):
        raise InvalidInputError(f"outbox must be a sequence, got {type(outbox).__name__}")
    stamp = now.astimezone(UTC).isoformat()
    stamped: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InvalidInputError(
                f"messages[{index}] must be Message, got {type(message).__name__}"
            )
        if message.timestamp is None:
            message = message.model_copy(update={"timestamp": stamp})
        stamped.append(message)
    items: dict[str, OutboxItem] = {}
    for index, item in enumerate(outbox):
        if not isinstance(item, OutboxItem):
            raise InvalidInputError(
                f"outbox[{index}] must be OutboxItem, got {type(item).__name__}"
            )
        items.setdefault(item.id, item)
    return PreparedCommit(state, tuple(stamped), tuple(items.values()))


class HeldTransaction:
    """The bookkeeping every store's transaction shares: open until closed, committed once."""

    def __init__(self, conversation_id: str) -> None:
        """A transaction on ``conversation_id``, open and not committed."""
        self._conversation_id = conversation_id
        self.committed = False
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise StateStoreError(
                f"transaction on conversation {shown(self._conversation_id)} is already closed"
            )

    def _check_first_commit(self) -> None:
        self._check_open()
        if self.committed:
            raise StateStoreError(
                f"transaction on conversation {shown(self._conversation_id)} was already committed"
            )
