"""Memory writes a committed turn owes the memory, carried through the state store's outbox.

A committed turn owes two writes: every memory it surfaced gets ``recall_count + 1`` and
``last_recalled_at``, and the user's message becomes a new memory. Both are planned into the
turn's own commit as one outbox item, applied right after it, and replayed from the outbox when
the memory is next opened, so a Chroma outage or a crash between commit and write loses
nothing. Applying an item twice is harmless: ids are deterministic, and the index counts each
(memory, turn) once (its recall counts live there, not in Chroma's rows).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from affect_memory.cues import DEFAULT_RETRIEVAL_RULE, RetrievalRule
from affect_memory.kernel.bounds import check_limit
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MAX_TEXT_CHARS
from affect_memory.kernel.protocols import OutboxItem, StateStore, TurnRecord
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.store import ChromaMemory

__all__ = [
    "MEMORY_TOPIC",
    "DefaultMemoryWritePolicy",
    "MemoryTurnEffects",
    "MemoryWritePolicy",
    "ReplayReport",
    "statements_of",
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


_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
"""Where one sentence of a message ends and the next begins."""


def statements_of(text: str, rule: RetrievalRule = DEFAULT_RETRIEVAL_RULE) -> str:
    """``text`` without its questions: the sentences the gate's question cues do not flag.

    "I moved to Berlin last week. Any tips for Kreuzberg?" gives "I moved to Berlin last
    week."; a message that only asks gives "".
    """
    kept = [
        sentence.strip()
        for sentence in _SENTENCE_END.split(text)
        if sentence.strip() and not rule.is_question(sentence.strip())
    ]
    return " ".join(kept)


class DefaultMemoryWritePolicy:
    """Store what a responding turn's user message states as an ordinary (non-episode) memory.

    Questions are not stored: a stored question is as close to the next time it is asked as
    anything can be, so it would outrank the fact that answers it at every door (recall, MCP,
    LangChain, the engine). The message keeps the sentences the gate's question cues
    (``affect_memory.cues.RetrievalRule.is_question``) do not flag, and a message that only
    asks stores nothing; ``store_questions=True`` stores every message whole, as before.
    Valence is the turn's appraised valence; significance is its strongest active emotion.
    Silent turns are not remembered: the agent chose not to engage with them.
    """

    def __init__(
        self, *, store_questions: bool = False, rule: RetrievalRule = DEFAULT_RETRIEVAL_RULE
    ) -> None:
        """Store questions too when ``store_questions``; ``rule`` says what a question is."""
        if not isinstance(store_questions, bool):
            raise InvalidInputError(f"store_questions must be a bool, got {store_questions!r}")
        self._store_questions = store_questions
        self._rule = rule

    def record_for(self, turn: TurnRecord, user_id: str) -> MemoryRecord | None:
        """What the user message states, as a memory; None for a silent or blank turn, or a
        message that only asks."""
        text = turn.message.content.strip()
        if turn.reply is None or not text:
            return None
        if not self._store_questions:
            text = statements_of(text, self._rule)
            if not text:
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


def _payload_user(payload: Mapping[str, Any]) -> str:
    """The user an outbox item writes for (items planned before ids were per user carry it
    only in their new record)."""
    user_id = payload.get("user_id")
    if user_id is None:
        user_id = (payload.get("new_record") or {}).get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise InvalidInputError(
            f"outbox item of turn {payload.get('turn_id')!r} names no user; memory writes "
            "are per user"
        )
    return user_id


@dataclass(frozen=True)
class ReplayReport:
    """What a replay of pending outbox items did."""

    applied: int
    failed: int
    quarantined: tuple[str, ...] = ()
    """Ids of poisoned items set aside (or, in a store that cannot, skipped) by this replay."""


_POISONED = (InvalidInputError, LookupError, TypeError, AttributeError)
"""What applying a malformed payload raises: retrying the same item can never succeed.

Chroma failures reach replay as ``StoreError`` (an outage, a refusal), so they stay pending.
"""

_REASON_CHARS = 1000


def _poison_reason(error: BaseException) -> str | None:
    """Why an item can never apply, or None when its failure may pass (e.g. Chroma is down)."""
    if not isinstance(error, _POISONED):
        return None
    return f"{type(error).__name__}: {error}"[:_REASON_CHARS]


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

    @property
    def user_id(self) -> str | None:
        """The user written for, or None (each turn's engine user id): an engine checks it."""
        return self._user_id

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
            "user_id": user_id,
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
            user_id=_payload_user(payload),
            recalled_ids=recalled,
            recalled_at=payload.get("recalled_at") if recalled else None,
            new_record=payload.get("new_record"),
        )

    async def replay_pending(self, store: StateStore, *, batch: int = 500) -> ReplayReport:
        """Apply every pending memory write in the store's outbox, oldest first, each once.

        Call it when the memory is opened: it finishes what a crash or an outage left undone.
        A write that may yet succeed (Chroma down) stays pending and stops the replay, so later
        writes keep their order. A poisoned item, whose payload can never apply (missing keys,
        a record the memory refuses), is named in a warning and quarantined when the store can
        (``SQLiteStateStore.quarantine_outbox``: never retried on its own), else skipped for
        this replay; either way the replay goes on with the rest.
        """
        check_limit(batch, "batch", minimum=1)
        quarantine = getattr(store, "quarantine_outbox", None)
        applied = 0
        poisoned: list[str] = []
        skipped: set[str] = set()  # poisoned, but still pending in a store without quarantine
        while True:
            pending = [
                item
                for item in await store.pending_outbox(self.topic, batch + len(skipped))
                if item.id not in skipped
            ]
            if not pending:
                return ReplayReport(applied=applied, failed=0, quarantined=tuple(poisoned))
            for item in pending:
                try:
                    await self.apply([item])
                except Exception as error:
                    reason = _poison_reason(error)
                    if reason is None:
                        logger.exception("memory write %s failed; it stays pending", item.id)
                        return ReplayReport(applied=applied, failed=1, quarantined=tuple(poisoned))
                    poisoned.append(item.id)
                    if callable(quarantine):
                        await quarantine(item.id, reason)
                        logger.warning(
                            "memory write %s can never apply and is quarantined (not retried "
                            "on its own; requeue_outbox retries it): %s",
                            item.id,
                            reason,
                        )
                    else:
                        skipped.add(item.id)
                        logger.warning(
                            "memory write %s can never apply and is skipped (this store cannot "
                            "quarantine it, so it stays pending): %s",
                            item.id,
                            reason,
                        )
                    continue
                await store.complete_outbox([item.id])
                applied += 1
