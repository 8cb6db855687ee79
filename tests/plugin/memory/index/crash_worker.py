"""A writer that is killed (SIGKILL) while it writes memories, for the index's crash tests.

Usage: python crash_worker.py LOCATION INDEX MODE SEED LOG [KILL_POINT CALL]
(INDEX ``-`` opens the location's default index)

MODE ``mixed`` runs adds, upserts (new texts for old ids), forgets and turns with a new
memory, for three users, forever (``add``, ``upsert``, ``forget`` or ``turn``: only that
kind); ``turns`` appends each turn to the file LOG (as a state
store's outbox would hold it) before applying its recall counts and new memory, recalling
only the seeded memories (``seed``, written by the test first), which it never changes.
Either prints ``ready`` once open, then ``op N`` before each operation.

KILL_POINT (optional) kills the process itself at a chosen step of the CALL-th time it is
reached: ``announced`` (journal committed, Chroma not written), ``written`` (Chroma written,
journal not settled), ``settling`` (inside the settling transaction, before its commit) or
``counting`` (inside the recall-count transaction, before its commit).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

from affect_memory.memory.index import memory_index
from affect_memory.memory.index.consistency import session
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import default_embedder

USERS = ("ann", "bob", "cyd")
WORDS = (
    "garden", "bees", "roof", "lisbon", "berlin", "moved", "cat", "piano", "hiking", "river",
    "coffee", "sister", "paris", "school", "painting", "adoption", "support", "group",
    "camping", "marathon", "violin", "recipe", "birthday", "museum",
)
SEEDED = 30
"""Memories every user starts with (ids s0..s29), which the turns mode never forgets."""


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(point: str, call: int) -> None:
    """Patch the step ``point`` to kill the process the ``call``-th time it is reached."""
    seen = {"n": 0}

    def due() -> bool:
        seen["n"] += 1
        return seen["n"] == call

    if point == "announced":
        original = session.WriteSession._announce

        def announced(self: Any, op: Any, items: Any) -> None:
            original(self, op, items)
            if due():
                _die()

        session.WriteSession._announce = announced  # type: ignore[method-assign]
    elif point == "written":
        for name in ("settle_writes", "settle_forget"):
            method = getattr(session.WriteSession, name)

            def written(self: Any, ids: Any, _method: Any = method) -> None:
                if due():
                    _die()
                _method(self, ids)

            setattr(session.WriteSession, name, written)
    elif point == "settling":
        settle = session.settle

        def settling(tx: Any, key: int, ids: Any) -> None:
            settle(tx, key, ids)
            if due():
                _die()

        session.settle = settling  # type: ignore[assignment]
    elif point == "counting":
        record = memory_index.record_recalls

        def counting(tx: Any, *args: Any, **kwargs: Any) -> Any:
            outcome = record(tx, *args, **kwargs)
            if due():
                _die()
            return outcome

        memory_index.record_recalls = counting  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown kill point {point!r}")


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))


def _record(ident: str, user: str, rng: random.Random, day: int) -> dict[str, Any]:
    return {
        "id": ident,
        "text": _text(rng),
        "user_id": user,
        "timestamp": f"2025-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T12:00:00Z",
        "significance": round(rng.random(), 3),
    }


def seed(memory: ChromaMemory) -> None:
    """The memories every user starts with (the test writes them before any worker runs)."""
    rng = random.Random(0)
    memory.add([_record(f"s{i}", user, rng, i) for user in USERS for i in range(SEEDED)])


KINDS = ("add", "upsert", "forget", "turn")


def mixed(memory: ChromaMemory, rng: random.Random, kinds: tuple[str, ...]) -> None:
    """Random writes of ``kinds`` (adds, upserts, forgets, turns with a new memory), forever,
    over ids ``m0``..``m59`` and the seeded ``s0``..``s29``."""
    step = 0
    pool = [f"m{i}" for i in range(60)] + [f"s{i}" for i in range(SEEDED)]
    while True:
        step += 1
        print(f"op {step}", flush=True)
        user = rng.choice(USERS)
        kind = rng.choice(kinds)
        if kind == "add":
            ids = rng.sample(pool, rng.randint(1, 25))
            memory.add([_record(ident, user, rng, step) for ident in ids])
        elif kind == "upsert":
            # Alone, upserts replace seeded memories only: the user's count never changes, so
            # only the journal can tell the index that a killed upsert's texts changed.
            ids = rng.sample(pool if len(kinds) > 1 else pool[60:], rng.randint(1, 12))
            memory.upsert([_record(ident, user, rng, step) for ident in ids])
        elif kind == "forget":
            memory.forget(rng.sample(pool, rng.randint(1, 15)), user_id=user)
        else:
            memory.apply_turn_writes(
                f"turn-{rng.getrandbits(48):x}",
                user_id=user,
                recalled_ids=rng.sample(pool, 4),
                recalled_at=f"2025-06-{1 + step % 28:02d}T12:00:00Z",
                new_record=_record(f"msg-{step}-{rng.getrandbits(32):x}", user, rng, step),
            )


def turns(memory: ChromaMemory, rng: random.Random, log: Path) -> None:
    """Turns recalling seeded memories, each logged (fsynced) before it is applied."""
    with log.open("a", encoding="utf-8") as out:
        step = 0
        while True:
            step += 1
            print(f"op {step}", flush=True)
            user = rng.choice(USERS)
            turn = {
                "turn_id": f"turn-{os.getpid()}-{step}",
                "user_id": user,
                "recalled_ids": rng.sample([f"s{i}" for i in range(SEEDED)], 5),
                "recalled_at": f"2025-07-{1 + step % 28:02d}T12:00:00Z",
                "new_record": _record(f"msg-{os.getpid()}-{step}", user, rng, step),
            }
            out.write(json.dumps(turn) + "\n")
            out.flush()
            os.fsync(out.fileno())
            memory.apply_turn_writes(turn.pop("turn_id"), **turn)


def main(argv: list[str]) -> None:
    location, index, mode, seed_text, log = argv[:5]
    if len(argv) > 5:
        _arm(argv[5], int(argv[6]))
    rng = random.Random(int(seed_text))
    chosen = None if index == "-" else index  # "-": the location's default index
    embedder = default_embedder()
    with ChromaMemory(location, index=chosen, embedder=embedder, progress=False) as memory:
        print("ready", flush=True)
        if mode == "turns":
            turns(memory, rng, Path(log))
        else:
            mixed(memory, rng, KINDS if mode == "mixed" else (mode,))


if __name__ == "__main__":
    main(sys.argv[1:])
