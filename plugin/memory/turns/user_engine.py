"""The engine for one user's conversation, as ``affect-memory chat`` and the HTTP API run it."""

from __future__ import annotations

from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.protocols import ModelAdapter, StateStore
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.turns.effects import MemoryTurnEffects

__all__ = ["user_engine"]


def user_engine(
    memory: ChromaMemory,
    model: ModelAdapter,
    store: StateStore,
    *,
    user_id: str,
    conversation_id: str,
    clock: Clock = utc_now,
) -> AffectEngine:
    """An engine whose turns retrieve ``user_id``'s memories only (ranked as ``recall`` ranks
    them) and write theirs through the store's outbox (``MemoryTurnEffects``)."""
    return AffectEngine(
        model=model,
        store=store,
        conversation_id=conversation_id,
        retriever=memory.retriever_for(user_id),
        effects=[MemoryTurnEffects(memory, user_id=user_id)],
        user_id=user_id,
        clock=clock,
    )
