"""An in-memory state store: per-conversation asyncio locks, defensive copies, an outbox."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from affect_memory.kernel.adapters.store_support import (
    HeldTransaction,
    check_outbox_ids,
    holding,
    prepare_commit,
)
from affect_memory.kernel.bounds import check_conversation_id, check_limit
from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import Message, OutboxItem

__all__ = ["InMemoryStateStore"]


@dataclass
class _Conversation:
    state: dict[str, Any] | None = None
    messages: list[Message] = field(default_factory=list)


@dataclass
class _OutboxRow:
    item: dict[str, Any]
    conversation_id: str
    seq: int
    applied: bool = False


class InMemoryStateStore:
    """A ``StateStore`` held in process memory; turns of one conversation run one at a time.

    States are kept as JSON-ready dumps and validated on load, so a caller can never share
    or alter what the store holds. Nothing survives the process.
    """

    def __init__(self, *, clock: Clock = utc_now) -> None:
        """An empty store; ``clock`` stamps messages that arrive without a timestamp."""
        self._clock = clock
        self._conversations: dict[str, _Conversation] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._outbox: dict[str, _OutboxRow] = {}
        self._seq = 0

    @asynccontextmanager
    async def transaction(self, conversation_id: str) -> AsyncIterator[_MemoryTransaction]:
        """Hold ``conversation_id`` exclusively until the block exits."""
        check_conversation_id(conversation_id)
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        with holding(f"memory:{id(self)}", conversation_id):
            async with lock:
                transaction = _MemoryTransaction(self, conversation_id)
                try:
                    yield transaction
                finally:
                    transaction.closed = True

    async def pending_outbox(self, topic: str, limit: int = 1000) -> tuple[OutboxItem, ...]:
        """Outbox items of ``topic`` not yet applied, oldest first."""
        if not isinstance(topic, str):
            raise InvalidInputError(f"topic must be a string, got {topic!r}")
        check_limit(limit, minimum=1)
        rows = sorted(
            (
                row
                for row in self._outbox.values()
                if not row.applied and row.item["topic"] == topic
            ),
            key=lambda row: row.seq,
        )
        return tuple(OutboxItem.model_validate(row.item) for row in rows[:limit])

    async def complete_outbox(self, ids: Sequence[str]) -> None:
        """Mark items applied; unknown ids are ignored."""
        for item_id in check_outbox_ids(ids):
            row = self._outbox.get(item_id)
            if row is not None:
                row.applied = True

    def _load_state(self, conversation_id: str) -> AffectState | None:
        conversation = self._conversations.get(conversation_id)
        if conversation is None or conversation.state is None:
            return None
        return AffectState.model_validate(conversation.state)

    def _load_transcript(self, conversation_id: str, limit: int | None) -> tuple[Message, ...]:
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            return ()
        messages = conversation.messages
        return tuple(messages[-limit:] if limit is not None else messages)

    def _commit(
        self, conversation_id: str, state: object, messages: object, outbox: object
    ) -> None:
        prepared = prepare_commit(state, messages, outbox, self._clock())
        dumped = None if prepared.state is None else prepared.state.model_dump(mode="json")
        conversation = self._conversations.setdefault(conversation_id, _Conversation())
        if dumped is not None:
            conversation.state = dumped
        conversation.messages.extend(prepared.messages)
        for item in prepared.outbox:
            if item.id not in self._outbox:
                self._seq += 1
                self._outbox[item.id] = _OutboxRow(
                    item.model_dump(mode="json"), conversation_id, self._seq
                )


class _MemoryTransaction(HeldTransaction):
    """One held conversation of an ``InMemoryStateStore``."""

    def __init__(self, store: InMemoryStateStore, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self._store = store

    async def load_state(self) -> AffectState | None:
        """The committed state, or None for a new conversation."""
        self._check_open()
        return self._store._load_state(self._conversation_id)

    async def load_transcript(self, limit: int | None = None) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        self._check_open()
        if limit is not None:
            check_limit(limit, minimum=1)
        return self._store._load_transcript(self._conversation_id, limit)

    async def commit(
        self,
        *,
        state: AffectState | None,
        messages: Sequence[Message],
        outbox: Sequence[OutboxItem] = (),
    ) -> None:
        """Write state (None keeps the old), messages and outbox at once; only once."""
        self._check_first_commit()
        self._store._commit(self._conversation_id, state, messages, outbox)
        self.committed = True
