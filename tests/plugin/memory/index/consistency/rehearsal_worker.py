"""Apply many turns that all recall the same memories, racing another process.

Usage: python rehearsal_worker.py CHROMA_URL INDEX NAME TURNS START_FILE

Opens the store, prints ``ready``, waits until START_FILE exists (so the racers start
together), then applies turns ``NAME-0``..``NAME-{TURNS-1}`` for user ``ann``, each recalling
memories ``s0``..``s9``, and prints ``done``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import default_embedder

RECALLED = [f"s{i}" for i in range(10)]


def main(url: str, index: str, name: str, turns: int, start: Path) -> None:
    with ChromaMemory(url, index=index, embedder=default_embedder(), progress=False) as memory:
        memory.index.rehearsal("ann", RECALLED)  # settled before the race begins
        print("ready", flush=True)
        while not start.exists():
            time.sleep(0.01)
        for turn in range(turns):
            memory.apply_turn_writes(
                f"{name}-{turn}",
                user_id="ann",
                recalled_ids=RECALLED,
                recalled_at=f"2026-01-01T00:00:{turn % 60:02d}Z",
            )
        print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
