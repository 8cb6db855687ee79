"""Memory writes a committed turn owes Chroma, carried through the state store's outbox.

A committed turn owes two writes: every memory it surfaced gets ``recall_count + 1`` and
``last_recalled_at``, and the user's message becomes a new memory. Both are planned into the
turn's own commit as one outbox item, applied right after it, and replayed from the outbox when
the memory is next opened, so a Chroma outage or a crash between commit and write loses
nothing. Applying an item twice is harmless: ids are deterministic and ``apply_turn_writes``
skips memories that already carry the turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kernel.errors import InvalidInputError
from kernel.models import MAX_TEXT_CHARS
from kernel.protocols import OutboxItem, StateStore, TurnRecord
from plugin.chroma_memory import ChromaMemory
from plugin.records import MemoryRecord

__all__ = [
    "MEMORY_TOPIC",
    "DefaultMemoryWritePolicy",
    "MemoryTurnEffects",
    "MemoryWritePolicy",
    "ReplayReport",
    "turn_id",
]

logger = logging.getLogger(__name__)

MEMORY_TOPIC = "chroma-memory"
"""The outbox topic of memory writes."""


def turn_id(turn: TurnRecord) -> str:
    """A deterministic id of one committed turn: conversation, turn time and message."""
    digest = hashlib.sha256()
    for part in (turn.conversation_id, turn.turn_time.isoformat(), turn.message.content):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return f"turn-{digest.hexdigest()[:24]}"


class MemoryWritePolicy(Protocol):
    """Decides which memory, if any, a committed turn's user message becomes."""

    def record_for(self, turn: TurnRecord, user_id: str) -> MemoryRecord | None:
        """The memory to store for ``turn``, or None to store nothing."""
        ...


class DefaultMemoryWritePolicy:
    """Store every responding turn's user message as an ordinary (non-episode) memory.

    Valence is the turn's appraised valence; significance is its strongest active emotion.
    Silent turns are not remembered: the agent chose not to engage with them.
    """

    def record_for(self, turn: TurnRecord, user_id: str) -> MemoryRecord | None:
        """The user message as a memory, or None for a silent or blank turn."""
        text = turn.message.content.strip()
        if turn.reply is None or not text:
            return None
        strongest = max(turn.active_emotions.values(), default=0.0)
        return MemoryRecord(
            id=f"{turn_id(turn)}-msg",
            text=text[:MAX_TEXT_CHARS],
            user_id=user_id,
            timestamp=turn.turn_time.isoformat(),
            significance=min(1.0, max(0.0, strongest)),
            episode=False,
            emotional_valence=turn.state.mood.valence,
            conversation_id=turn.conversation_id,
        )


@dataclass(frozen=True)
class ReplayReport:
    """What a replay of pending outbox items did."""

    applied: int
    failed: int


class MemoryTurnEffects:
    """The ``TurnEffects`` that keeps a ``ChromaMemory`` in step with committed turns."""

    topic = MEMORY_TOPIC

    def __init__(
        self,
        memory: ChromaMemory,
        *,
        user_id: str | None = None,
        policy: MemoryWritePolicy | None = None,
    ) -> None:
        """Write into ``memory`` for ``user_id`` (else the engine's user id of each turn)."""
        if user_id is not None and (not isinstance(user_id, str) or not user_id):
            raise InvalidInputError(f"user_id must be a non-empty string, got {user_id!r}")
        self._memory = memory
        self._user_id = user_id
        self._policy: MemoryWritePolicy = policy or DefaultMemoryWritePolicy()

    def plan(self, turn: TurnRecord) -> Sequence[OutboxItem]:
        """One outbox item holding the recall updates and the new memory of ``turn``."""
        user_id = self._user_id or turn.user_id
        if user_id is None:
            raise InvalidInputError(
                "memory writes need a user: give MemoryTurnEffects a user_id or the engine one"
            )
        recalled = [scored.candidate.id for scored in turn.memories]
        record = self._policy.record_for(turn, user_id)
        if not recalled and record is None:
            return ()
        ident = turn_id(turn)
        payload = {
            "turn_id": ident,
            "recalled_ids": recalled,
            "recalled_at": turn.turn_time.isoformat(),
            "new_record": None if record is None else record.model_dump(mode="json"),
        }
        return (OutboxItem(id=f"{ident}-{self.topic}", topic=self.topic, payload=payload),)

    async def apply(self, items: Sequence[OutboxItem]) -> None:
        """Apply items in order, idempotently; the first failure propagates (the rest wait)."""
        for item in items:
            await asyncio.to_thread(self._apply_one, item)

    def _apply_one(self, item: OutboxItem) -> None:
        payload = item.payload
        recalled = payload.get("recalled_ids") or []
        self._memory.apply_turn_writes(
            payload["turn_id"],
            recalled_ids=recalled,
            recalled_at=payload.get("recalled_at") if recalled else None,
            new_record=payload.get("new_record"),
        )

    async def replay_pending(self, store: StateStore, *, batch: int = 500) -> ReplayReport:
        """Apply every pending memory write in the store's outbox, oldest first.

        Call it when the memory is opened: it finishes what a crash or an outage left undone.
        A failing item stays pending and stops the replay, so later writes keep their order.
        """
        applied = 0
        while True:
            pending = await store.pending_outbox(self.topic, batch)
            if not pending:
                return ReplayReport(applied=applied, failed=0)
            for item in pending:
                try:
                    await self.apply([item])
                except Exception:
                    logger.exception("memory write %s failed; it stays pending", item.id)
                    return ReplayReport(applied=applied, failed=1)
                await store.complete_outbox([item.id])
                applied += 1
