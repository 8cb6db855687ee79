"""How a state store ties conversations to users, and what erasing a user removes from it.

The kernel's state schema keys everything by conversation and records no user, so both stores
keep a ``conversation_users`` table of ``(conversation_id, user_id)`` links, filled two ways:

* every commit links its conversation to each user its outbox items name (a memory turn
  effect's payload holds ``user_id``, or ``new_record.user_id``), so an engine running
  ``MemoryTurnEffects`` links its conversations without doing anything;
* ``link_user(conversation_id, user_id)`` links one explicitly (a conversation whose turns owe
  no memory writes).

``erase_user`` removes, in one transaction, every conversation linked to the user or holding an
outbox item that names them: its state, transcript, history, outbox items and every link to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.protocols import OutboxItem

__all__ = ["StateErasure", "check_user_id", "named_user", "outbox_naming", "payload_users"]


@dataclass(frozen=True, slots=True)
class StateErasure:
    """What erasing one user removed from a state store."""

    user_id: str
    conversations: tuple[str, ...]
    """The conversations removed (state, transcript and outbox items), sorted."""
    messages: int
    """Transcript messages removed."""
    outbox_items: int
    """Outbox items removed (every item of those conversations)."""


def check_user_id(user_id: object) -> str:
    """A user id as memories take it: a string of 1-512 characters without NUL."""
    if not isinstance(user_id, str) or not 1 <= len(user_id) <= 512 or "\x00" in user_id:
        raise InvalidInputError(
            f"user_id must be a string of 1-512 characters without NUL, got {shown(user_id)}"
        )
    return user_id


def named_user(payload: Any) -> str | None:
    """The user an outbox payload names (``user_id``, else ``new_record.user_id``), if any."""
    if not isinstance(payload, dict):
        return None
    user_id = payload.get("user_id")
    if user_id is None and isinstance(payload.get("new_record"), dict):
        user_id = payload["new_record"].get("user_id")
    return user_id if isinstance(user_id, str) and user_id else None


def payload_users(outbox: Sequence[OutboxItem]) -> set[str]:
    """Every user the items of one commit's outbox name."""
    return {user for item in outbox if (user := named_user(item.payload)) is not None}


def outbox_naming(
    rows: Iterable[tuple[str, str, object]], user_id: str
) -> tuple[set[str], set[str]]:
    """Of ``(item id, conversation id, payload text)`` rows, the ids and conversations of the
    items whose payload names ``user_id`` (an unreadable payload names nobody)."""
    ids: set[str] = set()
    conversations: set[str] = set()
    for item_id, conversation_id, text in rows:
        try:
            payload = json.loads(text) if isinstance(text, str | bytes) else None
        except (ValueError, RecursionError):
            continue
        if named_user(payload) == user_id:
            ids.add(item_id)
            conversations.add(conversation_id)
    return ids, conversations
