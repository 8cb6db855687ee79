"""What a SQLite store last read of each conversation, so a turn reads only what is new.

Message rows are append-only, so a cached transcript window is topped up with the rows after
its last ``seq``; a state row is decoded once per distinct text. The newest 64 conversations
are kept, and a window longer than 262,144 characters is not.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import Message
from affect_memory.state.common import decode_messages, decode_state

__all__ = ["ReadCache"]

_CACHED_CONVERSATIONS = 64
"""Conversations whose last read state and transcript window a store keeps in memory."""
_CACHED_CHARS = 262_144
"""A transcript window longer than this (in characters) is not kept in memory."""


@dataclass(frozen=True)
class _Cached:
    """What this store last read of a conversation: rows are append-only, so only newer
    rows (``seq > last_seq``) need reading again."""

    state_text: str | None = None
    state: AffectState | None = None
    messages: tuple[Message, ...] | None = None
    last_seq: int = 0
    complete: bool = False
    """``messages`` holds every message of the conversation."""


class ReadCache:
    """A store's reads of states and transcript windows, each conversation's cached."""

    def __init__(self) -> None:
        """Nothing read yet."""
        self._entries: OrderedDict[str, _Cached] = OrderedDict()
        self._guard = threading.Lock()

    def read_state(
        self, connection: sqlite3.Connection, conversation_id: str
    ) -> AffectState | None:
        """The committed state of a conversation, or None for a new one."""
        row = connection.execute(
            "SELECT state FROM conversations WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()
        return self.state_of(conversation_id, None if row is None else row[0])

    def state_of(self, conversation_id: str, text: str | None) -> AffectState | None:
        """The state a stored row holds, decoded once per distinct row text."""
        if text is None:
            return None
        cached = self._cached(conversation_id)
        if cached.state_text == text and cached.state is not None:
            return cached.state
        state = decode_state(conversation_id, text)
        self._remember(conversation_id, state_text=text, state=state)
        return state

    def read_transcript(
        self, connection: sqlite3.Connection, conversation_id: str, limit: int | None
    ) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        if limit is None:
            rows = connection.execute(
                "SELECT seq, role, content, timestamp FROM messages "
                "WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            ).fetchall()
            return decode_messages(conversation_id, rows)
        cached = self._cached(conversation_id)
        usable = cached.messages is not None and (cached.complete or len(cached.messages) >= limit)
        after = cached.last_seq if usable else 0
        rows = connection.execute(
            "SELECT seq, role, content, timestamp FROM messages "
            "WHERE conversation_id = ? AND seq > ? ORDER BY seq DESC LIMIT ?",
            (conversation_id, after, limit),
        ).fetchall()
        rows.reverse()
        fresh = decode_messages(conversation_id, rows)
        if usable and len(rows) < limit:
            assert cached.messages is not None
            window = cached.messages + fresh
            complete = cached.complete
        else:  # nothing usable cached, or the new rows alone fill the window
            window = fresh
            complete = not usable and len(rows) < limit
        if len(window) > limit:
            window, complete = window[-limit:], False
        last_seq = rows[-1][0] if rows else after
        if sum(len(message.content) for message in window) <= _CACHED_CHARS:
            self._remember(conversation_id, messages=window, last_seq=last_seq, complete=complete)
        else:
            self._remember(conversation_id, messages=None, last_seq=0, complete=False)
        return window

    def forget(self, conversation_ids: Iterable[str]) -> None:
        """Drop what is cached of these conversations (after their erasure)."""
        with self._guard:
            for conversation_id in conversation_ids:
                self._entries.pop(conversation_id, None)

    def _cached(self, conversation_id: str) -> _Cached:
        with self._guard:
            return self._entries.get(conversation_id) or _Cached()

    def _remember(self, conversation_id: str, **changes: Any) -> None:
        with self._guard:
            entry = self._entries.pop(conversation_id, None) or _Cached()
            self._entries[conversation_id] = replace(entry, **changes)
            while len(self._entries) > _CACHED_CONVERSATIONS:
                self._entries.popitem(last=False)
