"""Run one committed turn whose memory writes die with the process (SIGKILL) before Chroma.

Usage: python effects_worker.py CHROMA_DIR DB_PATH
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from affect_memory.kernel import GateResult
from affect_memory.kernel.adapters import ScriptedModel
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.protocols import OutboxItem
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.turns.effects import MemoryTurnEffects
from affect_memory.state.sqlite import SQLiteStateStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class DieBeforeWriting(MemoryTurnEffects):
    """Memory effects whose process is killed after the commit, before any Chroma write."""

    async def apply(self, items: Sequence[OutboxItem]) -> None:
        print("committed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


async def main(chroma_dir: str, db_path: str) -> None:
    with ChromaMemory(chroma_dir) as memory:
        model = ScriptedModel(
            gates=[GateResult(intent="CURIOSITY", should_retrieve=True)],
            replies=[["Berlin, ", "you said."]],
        )
        engine = AffectEngine(
            model=model,
            store=SQLiteStateStore(db_path),
            conversation_id="alice-chat",
            retriever=memory.retriever_for("alice"),
            effects=[DieBeforeWriting(memory)],
            user_id="alice",
            clock=lambda: NOW,
        )
        await engine.turn("I keep forgetting things. Where do I live these days?")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
