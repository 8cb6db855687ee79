"""The parent's side of a ``bench fleet`` run: the workers, the turn queue, the kills, and the
figures that come back.

Turns go, in random order, to whichever worker is free. At each kill point the next worker to
report the chosen moment — holding its conversation, or just committed and applying the turn's
writes — is SIGKILLed and a new process started in its place; its turn is sent again, first in
the queue, so its conversation's next turn shows how long the kill held that conversation up.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import deque
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affect_memory.bench.common import sentences, summary_ms
from affect_memory.bench.fleet_checks import Check
from affect_memory.bench.fleet_worker import WorkerConfig, message_for, run_worker

if TYPE_CHECKING:
    from affect_memory.bench.fleet import FleetOptions

__all__ = ["PARTS", "FleetRun"]

PARTS = ("state", "chroma_read", "chroma_write", "index", "embedding", "engine")
"""Who a turn's overhead is split between (``affect_memory.bench.fleet_worker``)."""


@dataclass
class _Slot:
    """One worker position: its current process, pipe and turn in flight."""

    number: int
    process: Any = None
    conn: Connection | None = None
    ready: bool = False
    dispatch: int | None = None
    phase: str = "idle"
    """idle, sent, holding (has its conversation), committed (applying the turn's writes)."""
    started: int = 0


@dataclass
class _Task:
    dispatch: int
    conversation: str
    user: str
    text: str


class FleetRun:
    """The parent's side of a run: workers, the turn queue, kills, and what came back."""

    def __init__(
        self,
        config: WorkerConfig,
        options: FleetOptions,
        conversations: dict[str, str],
        tmp: Path,
        progress: bool,
    ) -> None:
        self.config = config
        self.options = options
        self.conversations = conversations
        self.tmp = tmp
        self.progress = progress
        self.rng = random.Random(options.seed)
        self.context = multiprocessing.get_context("spawn")
        self.slots = [_Slot(number) for number in range(options.workers)]
        texts = sentences(500, seed=options.seed + 1)
        names = list(conversations)
        share, rest = divmod(options.turns, len(names))
        order = [name for i, name in enumerate(names) for _ in range(share + (i < rest))]
        self.rng.shuffle(order)
        self.texts = texts
        self.dispatched = 0
        self.queue: deque[_Task] = deque(self._task(name) for name in order)
        points = sorted(self.rng.sample(range(options.turns // 10, options.turns * 9 // 10),
                                        options.kills))  # fmt: skip
        self.kill_points = deque(points)
        self.kill_modes = deque(("holding", "committed")[i % 2] for i in range(options.kills))
        self.wanted_kill: str | None = None
        self.kills: list[dict[str, Any]] = []
        self.done: dict[int, dict[str, Any]] = {}
        self.sent_at: dict[int, float] = {}
        self.tasks: dict[int, _Task] = {}
        self.failures: list[str] = []
        self.restarts = 0
        self.replayed_on_start = 0
        self.drained = 0
        self.began = 0.0
        self.ended = 0.0

    def _task(self, conversation: str) -> _Task:
        number = self.dispatched
        self.dispatched += 1
        text = message_for(self.texts[number % len(self.texts)], conversation, number)
        task = _Task(number, conversation, self.conversations[conversation], text)
        return task

    # -- workers ----------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        parent, child = self.context.Pipe()
        slot.process = self.context.Process(
            target=run_worker, args=(self.config, slot.number, child), daemon=True
        )
        slot.process.start()
        child.close()
        slot.conn, slot.ready, slot.dispatch, slot.phase = parent, False, None, "idle"
        slot.started += 1

    def start_workers(self) -> None:
        """Start every worker and wait until each has its stores open."""
        for slot in self.slots:
            self._spawn(slot)
        deadline = time.monotonic() + 600
        while not all(slot.ready for slot in self.slots):
            self._pump(timeout=max(0.0, deadline - time.monotonic()))
            if time.monotonic() > deadline:
                raise RuntimeError("bench fleet: workers did not start within 600 s")

    def stop_workers(self) -> None:
        """Ask every worker to stop (the first drains the outbox); kill any that will not."""
        live = [slot for slot in self.slots if slot.process is not None and slot.process.is_alive()]
        for index, slot in enumerate(live):
            assert slot.conn is not None
            try:
                slot.conn.send({"op": "stop", "drain": index == 0})
            except OSError:
                continue
        for slot in live:
            assert slot.conn is not None
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if not slot.conn.poll(max(0.0, deadline - time.monotonic())):
                    break
                try:
                    message = slot.conn.recv()
                except (EOFError, OSError):  # a worker that died meanwhile: killed below
                    break
                if message.get("event") == "stopped":
                    self.drained += int(message.get("drained", 0))
                    break
            slot.process.join(timeout=30)
            if slot.process.is_alive():
                os.kill(slot.process.pid, signal.SIGKILL)
                slot.process.join()

    # -- the run ----------------------------------------------------------------------------

    def dispatch_all(self) -> None:
        """Send every queued turn, killing and restarting workers at the chosen points."""
        from tqdm import tqdm

        self.began = time.monotonic()
        with tqdm(total=self.options.turns, desc="fleet", unit="turn",
                  disable=not self.progress or None, leave=False) as bar:  # fmt: skip
            while self.queue or any(slot.dispatch is not None for slot in self.slots):
                for slot in self.slots:
                    if slot.ready and slot.dispatch is None and self.queue:
                        self._send(slot, self.queue.popleft())
                self._pump(timeout=5.0)
                bar.update(min(len(self.done), self.options.turns) - bar.n)
        self.ended = time.monotonic()

    def _send(self, slot: _Slot, task: _Task) -> None:
        assert slot.conn is not None
        slot.dispatch, slot.phase = task.dispatch, "sent"
        self.tasks[task.dispatch] = task
        self.sent_at[task.dispatch] = time.monotonic()
        slot.conn.send({"op": "turn", "dispatch": task.dispatch, "conversation": task.conversation,
                        "user": task.user, "text": task.text})  # fmt: skip

    def _pump(self, *, timeout: float) -> None:
        """Handle whatever the workers sent, and notice any that died."""
        waiting: dict[Any, tuple[_Slot, int]] = {}
        for slot in self.slots:
            if slot.conn is not None:
                waiting[slot.conn] = (slot, slot.started)
                waiting[slot.process.sentinel] = (slot, slot.started)
        for ready in wait(list(waiting), timeout=timeout):
            slot, started = waiting[ready]
            if started != slot.started:
                continue  # a process this pass already killed and replaced
            if ready is slot.process.sentinel:
                if slot.conn is not None and slot.conn.poll():
                    continue  # read its last messages first
                self._died(slot)
            assert slot.conn is not None
            try:
                message = slot.conn.recv()
            except (EOFError, OSError):
                continue
            self._handle(slot, message)

    def _died(self, slot: _Slot) -> None:
        slot.process.join()
        log = self.tmp / f"worker-{slot.number}.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        raise RuntimeError(
            f"bench fleet: worker {slot.number} died unexpectedly (exit status "
            f"{slot.process.exitcode}){': ' + tail[0] if tail else ''}; see {log}"
        )

    def _handle(self, slot: _Slot, message: dict[str, Any]) -> None:
        event = message["event"]
        if event == "ready":
            slot.ready = True
            self.replayed_on_start += int(message.get("replayed", 0))
        elif event == "error":
            raise RuntimeError(f"bench fleet: worker {slot.number} failed: {message['error']}")
        elif event in ("holding", "committed") and message["dispatch"] == slot.dispatch:
            slot.phase = event
            # A turn sent again after a kill is left alone, so each kill's recovery is seen.
            retries = {kill["retry"] for kill in self.kills}
            if self.wanted_kill == event and slot.dispatch not in retries:
                self._kill(slot)
        elif event == "done":
            self.done[message["dispatch"]] = message
            slot.dispatch, slot.phase = None, "idle"
            if self.kill_points and len(self.done) >= self.kill_points[0]:
                self.kill_points.popleft()
                self.wanted_kill = self.kill_modes.popleft()
        elif event == "failed":
            self.failures.append(message["error"])
            task = self.tasks[message["dispatch"]]
            slot.dispatch, slot.phase = None, "idle"
            again = self._task(task.conversation)
            self.queue.appendleft(again)
            for kill in self.kills:  # a kill's resent turn that failed: its next try counts
                if kill["retry"] == task.dispatch:
                    kill["retry"] = again.dispatch

    def _kill(self, slot: _Slot) -> None:
        """SIGKILL the worker now, start a new one, and send its conversation's turn again."""
        assert slot.dispatch is not None
        task = self.tasks[slot.dispatch]
        os.kill(slot.process.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        slot.process.join()
        if slot.conn is not None:
            slot.conn.close()
        retry = self._task(task.conversation)
        self.queue.appendleft(retry)
        self.kills.append({"slot": slot.number, "phase": slot.phase, "dispatch": task.dispatch,
                           "conversation": task.conversation, "retry": retry.dispatch,
                           "at": killed_at})  # fmt: skip
        self.wanted_kill = None
        self.restarts += 1
        self._spawn(slot)

    # -- the report -------------------------------------------------------------------------

    def _kill_report(self, kill: dict[str, Any], committed: set[str]) -> dict[str, Any]:
        """What one kill hit, and when its conversation's next turn (sent again) was done."""
        retry = self.done.get(kill["retry"])
        report = {
            "phase": kill["phase"],
            "conversation": kill["conversation"],
            "turn_committed": self.tasks[kill["dispatch"]].text in committed,
        }
        if retry is None:  # not reported done; committed all the same if its message is in
            return {**report, "next_turn_completed": self.tasks[kill["retry"]].text in committed}
        waited = self.sent_at[kill["retry"]] - kill["at"] + retry["total"]
        return {
            **report,
            "next_turn_completed": True,
            "next_turn_lock_wait_ms": round(retry["lock"] * 1e3, 3),
            "next_turn_done_after_ms": round(waited * 1e3, 3),
        }

    def report(self, checks: list[Check], committed: set[str]) -> dict[str, Any]:
        """Figures and checks of the run (``committed``: every committed user message)."""
        results = list(self.done.values())
        overheads = [result["overhead"] for result in results]
        parts = {
            part: [result["parts"][part] for result in results] for part in PARTS
        }
        spent = sum(overheads) or 1.0
        seconds = self.ended - self.began
        kills = [self._kill_report(kill, committed) for kill in self.kills]
        recovered = [k for k in kills if k["next_turn_completed"]]
        checks = [
            *checks,
            Check(
                "a killed worker's conversation completes its next turn",
                len(recovered) == len(kills),
                f"{len(kills)} kills ({sum(k['phase'] == 'holding' for k in kills)} holding a "
                f"conversation, {sum(k['phase'] == 'committed' for k in kills)} applying a "
                f"committed turn's writes); next turn done in at most "
                f"{max((k.get('next_turn_done_after_ms', 0) for k in recovered), default=0):.1f} "
                "ms (lock wait at most "
                f"{max((k.get('next_turn_lock_wait_ms', 0) for k in recovered), default=0):.1f} "
                "ms)",
                {"kills": len(kills), "recovered": len(recovered)},
            ),
        ]
        return {
            "benchmark": "fleet",
            "model": "scripted",
            "options": asdict(self.options),
            "cpu_count": os.cpu_count(),
            "turns": len(results),
            "seconds": round(seconds, 3),
            "turns_per_second": round(len(results) / seconds, 1) if seconds else 0.0,
            "overhead_ms": summary_ms(overheads, per_ms=1e-3),
            "turn_ms": summary_ms([result["total"] for result in results], per_ms=1e-3),
            "parts_ms": {part: summary_ms(values, per_ms=1e-3) for part, values in parts.items()},
            "parts_share": {part: round(sum(values) / spent, 4) for part, values in parts.items()},
            "failed_turns": len(self.failures),
            "failures": self.failures[:5],
            "restarts": self.restarts,
            "replayed_by_restarted_workers": self.replayed_on_start,
            "drained_at_the_end": self.drained,
            "kills": kills,
            "checks": [asdict(check) for check in checks],
        }
