"""The SQLite store under real OS processes: no lost update, no stale lock, no cross-talk.

Workers are separate Python processes (``tests/plugin/state/sqlite_worker.py``) sharing one file.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from affect_memory import LockTimeoutError, SQLiteStateStore
from affect_memory.kernel import AffectState, DefaultAppraisalPolicy
from affect_memory.kernel.adapters import ScriptedModel, ScriptedReply
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.protocols import GateResult
from tests.contracts.snapshots import dump_sqlite
from tests.plugin.state.history_checks import assert_history_replays, sqlite_history
from tests.plugin.state.sqlite_worker import intent_of, message_for, reply_for

ROOT = Path(__file__).resolve().parents[3]
POLICY = DefaultAppraisalPolicy()


class Worker:
    """A worker process whose stdout lines can be awaited with a deadline."""

    def __init__(self, mode: str, db: Path, conversation: str, **options: object) -> None:
        command = [sys.executable, "-m", "tests.plugin.state.sqlite_worker", mode, "--db", str(db)]
        command += ["--conversation", conversation]
        for name, value in options.items():
            flag = "--" + name.replace("_", "-")
            command += [flag] if value is True else [flag, str(value)]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, wanted: str, timeout: float = 60.0) -> None:
        """Wait until the worker prints ``wanted``; fail with its stderr if it exits first."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.kill()
                pytest.fail(f"worker did not print {wanted!r} within {timeout}s")
            if line is None:
                pytest.fail(f"worker exited before {wanted!r}: {self.stderr()}")
            if line == wanted:
                return

    def finish(self, timeout: float = 60.0) -> None:
        """Wait for a clean exit."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"worker did not finish within {timeout}s")
        assert code == 0, self.stderr()

    def kill(self) -> None:
        """SIGKILL: no cleanup code of the worker runs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stderr(self) -> str:
        assert self.process.stderr is not None
        if self.process.poll() is None:
            return "(still running)"
        return self.process.stderr.read()


def stored(db: Path, conversation: str) -> tuple[AffectState | None, list[tuple[str, str]]]:
    """The committed state and (role, content) transcript, read straight from the file."""
    import sqlite3

    connection = sqlite3.connect(db)
    try:
        row = connection.execute(
            "SELECT state FROM conversations WHERE conversation_id = ?", (conversation,)
        ).fetchone()
        messages = connection.execute(
            "SELECT role, content FROM messages WHERE conversation_id = ? ORDER BY seq",
            (conversation,),
        ).fetchall()
    finally:
        connection.close()
    state = None if row is None else AffectState.model_validate(json.loads(row[0])["state"])
    return state, [(role, content) for role, content in messages]


def assert_paired_and_replayable(
    state: AffectState | None, transcript: list[tuple[str, str]]
) -> None:
    """Strict user/assistant pairs, and the state equals replaying them in commit order."""
    assert len(transcript) % 2 == 0
    replayed = AffectState()
    for user, assistant in zip(transcript[::2], transcript[1::2], strict=True):
        assert user[0] == "user" and assistant[0] == "assistant"
        assert assistant[1] == reply_for(user[1])
        replayed = POLICY.appraise(replayed, intent_of(user[1]), user[1]).state
    assert state == (replayed if transcript else None)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shared.db"
    SQLiteStateStore(path).close()
    return path


def test_four_processes_on_one_conversation_lose_no_update(db: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    workers = [
        Worker("turns", db, "shared", worker=w, turns=25, go_file=go, delay=0.001) for w in range(4)
    ]
    for worker in workers:
        worker.expect("READY")
    go.touch()
    for worker in workers:
        worker.finish(timeout=120)
    state, transcript = stored(db, "shared")
    assert len(transcript) == 200
    assert_paired_and_replayable(state, transcript)
    users = [content for role, content in transcript if role == "user"]
    owners = [user.split(" ", 1)[0] for user in users]
    switches = sum(a != b for a, b in itertools.pairwise(owners))
    assert switches >= 3, "the workers never contended, so serialization went untested"
    for w in range(4):
        assert [u for u in users if u.startswith(f"w{w} ")] == [
            message_for(w, t) for t in range(25)
        ]


def test_a_process_killed_mid_generation_leaves_no_trace_and_no_lock(db: Path) -> None:
    Worker("turns", db, "victim", worker=0, turns=1).finish()
    before = dump_sqlite(db)
    hung = Worker("hang", db, "victim", worker=1, start=0)
    hung.expect("STREAMING")

    async def lock_is_held() -> bool:
        store = SQLiteStateStore(db)
        try:
            async with asyncio.timeout(0.3), store.transaction("victim"):
                return False
        except TimeoutError:
            return True
        finally:
            store.close()

    assert asyncio.run(lock_is_held())
    hung.kill()
    assert hung.process.returncode == -signal.SIGKILL
    assert dump_sqlite(db) == before
    Worker("turns", db, "victim", worker=2, turns=1).finish(timeout=20)
    state, transcript = stored(db, "victim")
    assert [content for _, content in transcript[::2]] == [message_for(0, 0), message_for(2, 0)]
    assert_paired_and_replayable(state, transcript)
    assert_history_replays(*sqlite_history(db, "victim"))


def test_a_turn_waits_for_a_conversation_another_process_holds_at_most_its_lock_timeout(
    db: Path,
) -> None:
    hung = Worker("hang", db, "held", worker=0)
    hung.expect("STREAMING")

    async def turn(lock_timeout: float) -> str:
        store = SQLiteStateStore(db, lock_timeout=lock_timeout)
        engine = AffectEngine(model=ScriptedModel(), store=store, conversation_id="held")
        try:
            return (await engine.turn("hello")).text
        finally:
            store.close()

    try:
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match=r"conversation 'held' after 0\.4 s"):
            asyncio.run(turn(0.4))
        assert 0.4 <= time.monotonic() - started < 10  # bounded, far below the 30 s default
        assert stored(db, "held") == (None, [])
    finally:
        hung.kill()
    assert asyncio.run(turn(10.0)) == "Okay."
    assert [content for _, content in stored(db, "held")[1]] == ["hello", "Okay."]


def test_kills_at_random_moments_never_leave_half_a_turn(db: Path) -> None:
    rng = random.Random(20261201)
    for round_number in range(3):
        worker = Worker("turns", db, "crashy", worker=round_number, turns=10_000, report=True)
        worker.expect("READY")
        worker.expect("TURN 0")
        threading.Event().wait(rng.uniform(0.0, 0.3))
        worker.kill()
        state, transcript = stored(db, "crashy")
        assert_paired_and_replayable(state, transcript)
        # after every kill: one history row per committed turn, none for a lost one
        assert_history_replays(*sqlite_history(db, "crashy"))
    assert len(transcript) >= 6


def test_a_hung_turn_in_another_process_does_not_hold_up_another_conversation(
    db: Path,
) -> None:
    hung = Worker("hang", db, "slow", worker=0)
    hung.expect("STREAMING")

    async def quick_turn() -> str:
        store = SQLiteStateStore(db)
        engine = AffectEngine(model=ScriptedModel(), store=store, conversation_id="fast")
        try:
            async with asyncio.timeout(10):
                return (await engine.turn("hello")).text
        finally:
            store.close()

    try:
        assert asyncio.run(quick_turn()) == "Okay."
        assert hung.process.poll() is None  # the slow turn was still in generation
    finally:
        hung.kill()
    assert stored(db, "slow") == (None, [])


async def test_a_slow_turn_does_not_hold_up_another_conversation(db: Path) -> None:
    events: list[str] = []
    release = asyncio.Event()
    started = asyncio.Event()
    slow_model = ScriptedModel(
        gates=[GateResult(intent="CASUAL")],
        replies=[ScriptedReply(chunks=("slow",), pause=release, pause_after=0, started=started)],
    )
    slow_store, fast_store = SQLiteStateStore(db), SQLiteStateStore(db)
    slow = AffectEngine(model=slow_model, store=slow_store, conversation_id="slow")
    fast = AffectEngine(model=ScriptedModel(), store=fast_store, conversation_id="fast")

    async def slow_turn() -> None:
        await slow.turn("take your time")
        events.append("slow committed")

    running = asyncio.create_task(slow_turn())
    await started.wait()
    async with asyncio.timeout(10):
        await fast.turn("quick one")
    events.append("fast committed")
    release.set()
    await running
    slow_store.close()
    fast_store.close()
    assert events == ["fast committed", "slow committed"]


def _lock_file_of(db: Path, conversation: str) -> Path:
    digest = hashlib.sha256(conversation.encode("utf-8")).hexdigest()
    return db.with_name(db.name + ".locks") / f"{digest}.lock"


@pytest.mark.parametrize("first_to_commit", ["newcomer", "holder"])
def test_removing_a_held_lock_file_loses_no_update(
    db: Path, tmp_path: Path, first_to_commit: str
) -> None:
    Worker("turns", db, "shared", worker=0, turns=1).finish()
    holder_go, newcomer_go = tmp_path / "holder-go", tmp_path / "newcomer-go"
    holder = Worker("held", db, "shared", worker=1, go_file=holder_go)
    holder.expect("STREAMING")
    lock = _lock_file_of(db, "shared")
    lock.unlink()  # a clean-up of "stale" lock files, while the holder is mid-turn
    newcomer = Worker("held", db, "shared", worker=2, go_file=newcomer_go)
    try:
        newcomer.expect("STREAMING")  # the lock file was gone, so nothing stopped it
        first, second = (newcomer, holder) if first_to_commit == "newcomer" else (holder, newcomer)
        (newcomer_go if first is newcomer else holder_go).touch()
        first.expect("DONE")
        first.finish()
        (holder_go if first is newcomer else newcomer_go).touch()
        second.expect("FAILED")
        assert second.process.wait(timeout=60) == 3
        assert "conversation 'shared' changed while" in second.stderr()
    finally:
        holder.kill()
        newcomer.kill()
    state, transcript = stored(db, "shared")
    first_worker = 2 if first_to_commit == "newcomer" else 1
    assert [content for _, content in transcript[::2]] == [
        message_for(0, 0),
        message_for(first_worker, 0),
    ]
    assert_paired_and_replayable(state, transcript)
