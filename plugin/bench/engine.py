"""``affect-memory bench engine``: turns per second and per-stage time of the turn engine.

Each run starts fresh worker processes (spawn) on one SQLite file in a temporary directory, or
with ``--state postgresql://...`` on a schema of their own on that server (dropped afterwards);
each worker drives its own conversation with the scripted model and a static retriever, so
the numbers are the engine and store alone. Overhead is a turn's time minus its generation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import queue
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from affect_memory.bench.common import add_json_option, load_average, print_report, summary_ms
from affect_memory.kernel.engine import STAGES
from affect_memory.kernel.errors import InvalidInputError

__all__ = ["OVERHEAD_TARGET_MS", "register", "run", "run_benchmark"]

OVERHEAD_TARGET_MS = 5.0
"""The issue's target: median per-turn time of engine and store, excluding generation."""

PROCESS_COUNTS = (1, 4)
REPORTED_STAGES = tuple(stage for stage in STAGES if stage != "effects")
"""Every engine stage but the post-commit effects, which the scripted bench has none of."""
_INTENTS = ("CASUAL", "CURIOSITY", "VULNERABILITY", "CHALLENGE", "APOLOGY", "NEGLECT", "ABUSE")
_CANDIDATES = 20


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench engine``."""
    parser = benchmarks.add_parser(
        "engine",
        help="turns/s and per-stage time of the turn engine on the SQLite (or a PostgreSQL) store",
        description=(
            "Run scripted turns through the engine on a SQLite file in a temporary directory, "
            "with 1 and 4 processes, and report turns/s and median/p95 time per stage. "
            f"The target is a median overhead (turn minus generation) under "
            f"{OVERHEAD_TARGET_MS:g} ms."
        ),
    )
    parser.add_argument(
        "--turns", type=int, default=1000, help="measured turns per process (default 1000)"
    )
    parser.add_argument("--quick", action="store_true", help="a few turns only, for CI")
    parser.add_argument(
        "--state",
        metavar="URL",
        default=None,
        help="measure this PostgreSQL server instead (postgresql://USER@HOST:PORT/DB; in a "
        "schema of its own, dropped afterwards, or the empty ?schema=NAME); default: SQLite "
        "files in a temporary directory",
    )
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print a table, or JSON with ``--json``."""
    turns = 30 if args.quick else args.turns
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise InvalidInputError(f"--turns must be a positive integer, got {turns!r}")
    if args.state is not None:
        from affect_memory.state.location import parse_state_url

        if parse_state_url(args.state, source="--state").kind != "postgresql":
            raise InvalidInputError(
                "bench engine measures SQLite in a temporary directory of its own; --state "
                "takes a postgresql:// URL to measure that server instead"
            )
    report = run_benchmark(
        turns, warmup=5 if args.quick else 50, progress=not args.quick, state=args.state
    )
    return print_report(report, as_json=args.json, text=format_report)


def run_benchmark(
    turns: int,
    *,
    warmup: int = 50,
    process_counts: Sequence[int] = PROCESS_COUNTS,
    progress: bool = True,
    state: str | None = None,
) -> dict[str, Any]:
    """Measure every process count, on SQLite or the PostgreSQL server ``state`` names."""
    runs = []
    load_before = load_average()
    with contextlib.ExitStack() as stack:
        if state is None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="affect-memory-")))
            targets = {count: str(tmp / f"bench-{count}.db") for count in process_counts}
        else:
            from affect_memory.bench.servers import bench_schema

            url = stack.enter_context(bench_schema(state, prefix="bench_engine"))
            targets = dict.fromkeys(process_counts, url)
        for count in process_counts:
            runs.append(_run_processes(targets[count], count, turns, warmup, progress))
    single = runs[0]
    return {
        "benchmark": "engine",
        "store": "sqlite" if state is None else "postgresql",
        "model": "scripted",
        "turns_per_process": turns,
        "warmup_turns": warmup,
        "candidates_per_turn": _CANDIDATES,
        "cpu_count": os.cpu_count(),
        "load_average_1min": {
            "before": load_before,
            "after": load_average(),
        },
        "runs": runs,
        "target": {
            "overhead_median_ms": OVERHEAD_TARGET_MS,
            "measured_ms": single["overhead_ms"]["median"],
            "processes": single["processes"],
            "met": single["overhead_ms"]["median"] < OVERHEAD_TARGET_MS,
        },
    }


def _run_processes(
    target: str, count: int, turns: int, warmup: int, progress: bool
) -> dict[str, Any]:
    from tqdm import tqdm

    from affect_memory.state.location import open_state_store

    open_state_store(target).close()  # create the schema before the workers race for it
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    done: Synchronized[int] = context.Value("i", 0)
    results: Queue[dict[str, Any]] = context.Queue()
    workers = [
        context.Process(
            target=_worker,
            args=(target, f"bench-{count}p-{index}", turns, warmup, start, done, results),
            daemon=True,
        )
        for index in range(count)
    ]
    for worker in workers:
        worker.start()
    ready = 0
    collected: list[dict[str, Any]] = []
    while ready < count:
        message = results.get(timeout=120)
        if message.get("ready"):
            ready += 1
        else:  # pragma: no cover - a worker failed before it was ready
            raise RuntimeError(f"bench worker failed: {message.get('error')}")
    began = time.monotonic()
    start.set()
    total = count * (turns + warmup)
    with tqdm(
        total=total,
        desc=f"{count} process(es)",
        unit="turn",
        disable=not progress or None,
        leave=False,
    ) as bar:
        while len(collected) < count:
            with contextlib.suppress(queue.Empty):
                collected.append(results.get(timeout=0.2))
            bar.update(done.value - bar.n)
    for worker in workers:
        worker.join(timeout=30)
    failures = [result["error"] for result in collected if "error" in result]
    if failures:
        raise RuntimeError(f"bench worker failed: {failures[0]}")
    seconds = max(result["finished"] for result in collected) - began
    measured = count * turns
    stages: dict[str, list[float]] = {}
    for result in collected:
        for stage, values in result["stages"].items():
            stages.setdefault(stage, []).extend(values)
    totals = [value for result in collected for value in result["totals"]]
    overheads = [value for result in collected for value in result["overheads"]]
    return {
        "processes": count,
        "turns": measured,
        "seconds": round(seconds, 4),
        "turns_per_second": round((count * (turns + warmup)) / seconds, 1),
        "turn_ms": _summary(totals),
        "overhead_ms": _summary(overheads),
        "stages_ms": {
            stage: _summary(stages[stage]) for stage in REPORTED_STAGES if stage in stages
        },
    }


def _summary(seconds: Sequence[float]) -> dict[str, float]:
    return summary_ms(seconds, per_ms=1e-3)


def _worker(
    target: str,
    conversation: str,
    turns: int,
    warmup: int,
    start: Event,
    done: Synchronized[int],
    results: Queue[dict[str, Any]],
) -> None:
    """One benchmark process: ``warmup`` unmeasured turns, then ``turns`` measured ones."""
    try:
        result = asyncio.run(_drive(target, conversation, turns, warmup, start, done, results))
    except BaseException as error:  # reported to the parent, which raises
        results.put({"error": f"{type(error).__name__}: {error}"})
        return
    results.put(result)


async def _drive(
    target: str,
    conversation: str,
    turns: int,
    warmup: int,
    start: Event,
    done: Synchronized[int],
    results: Queue[dict[str, Any]],
) -> dict[str, Any]:
    from affect_memory.kernel.adapters import ScriptedModel, StaticRetriever
    from affect_memory.kernel.engine import AffectEngine
    from affect_memory.kernel.models import MemoryCandidate
    from affect_memory.kernel.protocols import GateInput, GateResult
    from affect_memory.state.location import open_state_store

    now = datetime(2026, 3, 1, tzinfo=UTC)
    candidates = [
        MemoryCandidate(
            id=f"m{n}",
            text=f"a remembered detail number {n} " * 8,
            distance=0.2 + n / 50,
            timestamp=(now - timedelta(days=n)).isoformat(),
            significance=n / _CANDIDATES,
            emotional_valence=((n % 5) - 2) / 2,
        )
        for n in range(_CANDIDATES)
    ]
    counter = iter(range(1 << 62))

    def classify(request: GateInput) -> GateResult:
        return GateResult(intent=_INTENTS[next(counter) % len(_INTENTS)], should_retrieve=True)

    model = ScriptedModel(
        classify=classify,
        respond=lambda request: ("Thanks ", "for telling me. ", "What happened next?"),
    )
    stages: dict[str, list[float]] = {}
    current: dict[str, float] = {}

    def observe(stage: str, seconds: float) -> None:
        current[stage] = seconds

    store = open_state_store(target)
    engine = AffectEngine(
        model=model,
        store=store,
        conversation_id=conversation,
        retriever=StaticRetriever(candidates),
        observer=observe,
        clock=lambda: now,
    )
    results.put({"ready": True})
    await asyncio.to_thread(start.wait)
    totals: list[float] = []
    overheads: list[float] = []
    for number in range(warmup + turns):
        current.clear()
        began = time.perf_counter()
        await engine.turn(f"message {number}: the day went sideways and I keep thinking of it")
        elapsed = time.perf_counter() - began
        with done.get_lock():
            done.value += 1
        if number < warmup:
            continue
        totals.append(elapsed)
        overheads.append(elapsed - current.get("generate", 0.0))
        for stage, seconds in current.items():
            stages.setdefault(stage, []).append(seconds)
    finished = time.monotonic()
    store.close()
    return {"totals": totals, "overheads": overheads, "stages": stages, "finished": finished}


def format_report(report: dict[str, Any]) -> str:
    """The report as two tables: per-stage times, then throughput per process count."""
    from affect_memory.formatting import format_table

    runs = report["runs"]
    headers = ["stage"]
    for run_report in runs:
        headers += [
            f"median ms ({run_report['processes']}p)",
            f"p95 ms ({run_report['processes']}p)",
        ]
    rows: list[list[object]] = []
    for stage in REPORTED_STAGES:
        if all(stage in run_report["stages_ms"] for run_report in runs):
            row: list[object] = [stage]
            for run_report in runs:
                row += [
                    run_report["stages_ms"][stage]["median"],
                    run_report["stages_ms"][stage]["p95"],
                ]
            rows.append(row)
    for label, key in (("overhead (turn - generate)", "overhead_ms"), ("whole turn", "turn_ms")):
        row = [label]
        for run_report in runs:
            row += [run_report[key]["median"], run_report[key]["p95"]]
        rows.append(row)
    throughput = format_table(
        ["processes", "turns", "seconds", "turns/s"],
        [[r["processes"], r["turns"], r["seconds"], r["turns_per_second"]] for r in runs],
    )
    target = report["target"]
    verdict = "met" if target["met"] else "NOT met"
    return "\n\n".join(
        [
            format_table(headers, rows),
            throughput,
            f"target: median overhead < {target['overhead_median_ms']:g} ms with "
            f"{target['processes']} process: {target['measured_ms']:.3f} ms ({verdict}); "
            f"{report['cpu_count']} CPUs, 1-min load average "
            f"{report['load_average_1min']['before']} before, "
            f"{report['load_average_1min']['after']} after",
        ]
    )
