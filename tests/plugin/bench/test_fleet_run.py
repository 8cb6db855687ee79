"""The fleet's parent side: what a failed turn sent again after a kill does to the kill's report."""

from __future__ import annotations

from pathlib import Path

from affect_memory.bench.fleet import FleetOptions
from affect_memory.bench.fleet_run import FleetRun, _Slot
from affect_memory.bench.fleet_worker import WorkerConfig


def _run(tmp_path: Path) -> FleetRun:
    config = WorkerConfig("sqlite:///unused", "http://127.0.0.1:1", "fleet", None, 0.0, 0.0)
    options = FleetOptions(workers=1, conversations=1, users=1, turns=8, kills=1)
    return FleetRun(config, options, {"conv-00": "user-00"}, tmp_path, progress=False)


def test_a_resent_turn_that_fails_in_a_fault_hands_the_kill_its_next_try(tmp_path: Path) -> None:
    run = _run(tmp_path)
    killed, resent = run.queue.popleft(), run.queue.popleft()
    for task in (killed, resent):
        run.tasks[task.dispatch] = task
    run.kills.append({"slot": 0, "phase": "holding", "dispatch": killed.dispatch,
                      "conversation": "conv-00", "retry": resent.dispatch, "at": 0.0})  # fmt: skip
    slot = _Slot(0, dispatch=resent.dispatch, phase="sent")
    run._handle(slot, {"event": "failed", "dispatch": resent.dispatch, "error": "Chroma down"})
    again = run.queue[0]
    assert again.conversation == "conv-00"
    assert again.dispatch not in (killed.dispatch, resent.dispatch)
    assert run.kills[0]["retry"] == again.dispatch
    run.tasks[again.dispatch] = again
    run.sent_at[again.dispatch] = 1.0
    run._handle(slot, {"event": "done", "dispatch": again.dispatch, "total": 0.5, "lock": 0.01})
    report = run._kill_report(run.kills[0], committed={again.text})
    assert report["next_turn_completed"] is True


def test_a_failure_of_a_turn_no_kill_resent_leaves_the_kills_alone(tmp_path: Path) -> None:
    run = _run(tmp_path)
    killed, resent, other = (run.queue.popleft() for _ in range(3))
    for task in (killed, resent, other):
        run.tasks[task.dispatch] = task
    run.kills.append({"slot": 0, "phase": "holding", "dispatch": killed.dispatch,
                      "conversation": "conv-00", "retry": resent.dispatch, "at": 0.0})  # fmt: skip
    run._handle(_Slot(0, dispatch=other.dispatch), {"event": "failed", "dispatch": other.dispatch,
                                                   "error": "timeout"})  # fmt: skip
    assert run.kills[0]["retry"] == resent.dispatch
