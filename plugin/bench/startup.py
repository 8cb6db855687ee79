"""``affect-memory bench startup``: how long a fresh process takes to answer, against chromadb.

Every case is a new process, timed from spawn to its answer with ``time.perf_counter_ns``:
the baseline ``python -c "import chromadb"``, a one-shot ``recall`` on a one-memory store,
``classify`` of an empty and of a real message, ``stats``, and the first MCP tool call (the
SDK's stdio client spawning ``affect-memory mcp`` and calling ``recall``). The cases run
round-robin, so load that comes and goes hits them alike; each is reported as the median of
the rounds and as a ratio to the baseline's median. The warm cases share a cache filled
before the first round; the "first run" cases each get an empty cache of their own, as on
a machine that never ran affect-memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.bench.common import add_json_option, load_average, machine, print_report
from affect_memory.kernel.errors import AffectMemoryError, InvalidInputError

__all__ = ["TARGETS", "TARGET_RATIO", "register", "run", "run_benchmark"]

TARGET_RATIO = 3.0
"""The issue's bound: a one-shot recall and the first MCP call within 3x ``import chromadb``."""

TARGETS = {"recall": "one-shot recall", "mcp": "first MCP tool call"}
"""The cases the issue bounds, and how the report names them."""

RUN_TIMEOUT = 600.0
"""Seconds one case may take before the benchmark gives up (a very loaded machine)."""

_MEMORY = {
    "id": "m1",
    "text": "I adopted a grey cat called Miso last spring.",
    "user_id": "alice",
    "timestamp": "2026-11-30T12:00:00+00:00",
}
_QUERY = "tell me about my pet"


@dataclass(frozen=True)
class _Case:
    name: str
    shown: str
    """The command as the report prints it."""
    model: bool = True
    """False for a case that loads no model (its cache does not matter)."""
    cold: bool = False
    """True when the case runs on an empty cache (a first run ever)."""

    @property
    def cache(self) -> str:
        """The report's cache column: warm, empty, or - for a case without a model."""
        return "-" if not self.model else "empty" if self.cold else "warm"


CASES = (
    _Case("baseline", 'python -c "import chromadb"', model=False),
    _Case("recall", f'affect-memory recall "{_QUERY}" --user-id alice'),
    _Case("classify_empty", 'affect-memory classify "" (no model needed)', model=False),
    _Case("classify", 'affect-memory classify "hello there"'),
    _Case("stats", "affect-memory stats (no model needed)", model=False),
    _Case("mcp", "MCP stdio client: spawn affect-memory mcp, initialize, call recall"),
    _Case("recall_first_run", "recall, on an empty cache", cold=True),
    _Case("classify_first_run", 'classify "hello there", on an empty cache', cold=True),
    _Case("mcp_first_run", "first MCP tool call, on an empty cache", cold=True),
)
"""Every case, in the order each round runs them."""


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench startup``."""
    parser = benchmarks.add_parser(
        "startup",
        help="cold-start time of one-shot commands and the MCP server vs import chromadb",
        description=(
            "Time fresh processes from spawn to answer: python -c 'import chromadb' (the "
            "baseline), a one-shot recall on a one-memory store, classify '' and a message, "
            "stats, the first MCP tool call through the SDK's stdio client, and recall, "
            "classify and the MCP call again on an empty cache (a first run). Cases run "
            "round-robin; each is reported as the median of the rounds and as a ratio to the "
            f"baseline. Targets: recall and the first MCP call within {TARGET_RATIO:g}x."
        ),
    )
    parser.add_argument(
        "--repeats", type=int, default=3, metavar="N", help="rounds of every case (default 3)"
    )
    parser.add_argument("--quick", action="store_true", help="one round only, for CI")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print a table, or JSON with ``--json``."""
    repeats = 1 if args.quick else args.repeats
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InvalidInputError(f"--repeats must be a positive integer, got {repeats!r}")
    report = run_benchmark(repeats, progress=not args.quick)
    return print_report(report, as_json=args.json, text=format_report)


def _cli() -> list[str]:
    """The ``affect-memory`` console script beside this interpreter, or
    ``python -m affect_memory``."""
    script = Path(sys.executable).with_name("affect-memory")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "affect_memory"]


def _environment(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "AFFECT_MEMORY_CACHE": str(cache),
    }


def _timed(command: Sequence[str], env: dict[str, str]) -> int:
    """Nanoseconds from spawn to exit of ``command``, which must succeed."""
    start = time.perf_counter_ns()
    result = subprocess.run(
        list(command),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    elapsed = time.perf_counter_ns() - start
    if result.returncode != 0:
        tail = " ".join(result.stderr.split())[-300:]
        raise AffectMemoryError(f"{' '.join(command)} exited {result.returncode}: {tail}")
    return elapsed


async def _first_tool_call(command: Sequence[str], env: dict[str, str], errlog: Path) -> int:
    """Nanoseconds from spawning the MCP server to the answer of its first ``recall`` call."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env)
    with errlog.open("a", encoding="utf-8") as log:
        start = time.perf_counter_ns()
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("recall", {"query": _QUERY, "user_id": "alice"})
            elapsed = time.perf_counter_ns() - start
    if result.is_error or "Miso" not in json.dumps(result.model_dump(mode="json")):
        raise AffectMemoryError(f"the first MCP recall did not return the memory: {result}")
    return elapsed


def _mcp_available() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


class _Workspace:
    """One-memory stores (one per case that opens one), the warm cache, and empty caches."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.warm = root / "cache"
        self.env = _environment(self.warm)
        self._fresh = 0

    def prepare(self) -> None:
        """Ingest the memory into every store and fill the warm cache (graph and exemplars)."""
        records = self.root / "memory.jsonl"
        records.write_text(json.dumps(_MEMORY) + "\n", encoding="utf-8")
        for name in ("recall", "mcp", "stats"):
            _timed([*_cli(), "ingest", str(records), *self.store(name), "--no-progress"], self.env)
        _timed([*_cli(), "classify", "hello there"], self.env)

    def store(self, name: str) -> list[str]:
        """``--data-dir`` of the store the case ``name`` uses (cold cases share the warm's)."""
        return ["--data-dir", str(self.root / name.removesuffix("_first_run"))]

    def empty_cache_env(self) -> tuple[dict[str, str], Path]:
        """An environment whose cache is a new empty directory, and that directory."""
        self._fresh += 1
        cache = self.root / f"empty-cache-{self._fresh}"
        return _environment(cache), cache


def _measure_case(case: _Case, space: _Workspace) -> int:
    env, cache = space.empty_cache_env() if case.cold else (space.env, None)
    base = case.name.removesuffix("_first_run")
    cli = _cli()
    try:
        if base == "baseline":
            return _timed([sys.executable, "-c", "import chromadb"], env)
        if base == "recall":
            return _timed([*cli, "recall", _QUERY, "--user-id", "alice", *space.store(base)], env)
        if base == "classify_empty":
            return _timed([*cli, "classify", ""], env)
        if base == "classify":
            return _timed([*cli, "classify", "hello there"], env)
        if base == "stats":
            return _timed([*cli, "stats", *space.store(base)], env)
        command = [*cli, "mcp", *space.store(base)]
        return asyncio.run(_first_tool_call(command, env, space.root / "mcp-stderr.log"))
    finally:
        if cache is not None:  # 90 MB per first run: do not keep them
            shutil.rmtree(cache, ignore_errors=True)


def run_benchmark(
    repeats: int, *, progress: bool = True, cases: Sequence[str] | None = None
) -> dict[str, Any]:
    """Measure every case ``repeats`` times, round-robin; the report is JSON-ready."""
    chosen = [case for case in CASES if cases is None or case.name in cases]
    skipped: dict[str, str] = {}
    if not _mcp_available():
        skipped = {c.name: "the mcp extra is not installed" for c in chosen if "mcp" in c.name}
        chosen = [case for case in chosen if case.name not in skipped]
    load_before = load_average()
    samples: dict[str, list[int]] = {case.name: [] for case in chosen}
    with tempfile.TemporaryDirectory(prefix="affect-memory-bench-startup-") as root:
        space = _Workspace(Path(root))
        space.prepare()
        advance = _progress(repeats * len(chosen), enabled=progress)
        for _round in range(repeats):
            for case in chosen:
                samples[case.name].append(_measure_case(case, space))
                advance()
    return _report(chosen, samples, skipped, repeats, load_before)


def _progress(total: int, *, enabled: bool) -> Callable[[], None]:
    """A callable advancing a tqdm bar on stderr (shown only on a terminal), or a no-op."""
    if not enabled:
        return lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, file=sys.stderr, unit="run", leave=False, disable=None)

    def advance() -> None:
        bar.update()
        if bar.n >= total:
            bar.close()

    return advance


def _report(
    chosen: Sequence[_Case],
    samples: dict[str, list[int]],
    skipped: dict[str, str],
    repeats: int,
    load_before: float,
) -> dict[str, Any]:
    medians = {name: statistics.median(values) / 1e9 for name, values in samples.items()}
    baseline = medians.get("baseline")
    rows: list[dict[str, Any]] = []
    for case in chosen:
        median = medians[case.name]
        rows.append(
            {
                "name": case.name,
                "command": case.shown,
                "cache": case.cache,
                "seconds": [round(value / 1e9, 4) for value in samples[case.name]],
                "median_s": round(median, 4),
                "ratio": None if not baseline else round(median / baseline, 3),
            }
        )
    ratios: dict[str, float | None] = {row["name"]: row["ratio"] for row in rows}
    targets = []
    for name, label in TARGETS.items():
        measured = ratios.get(name)
        targets.append(
            {
                "case": name,
                "label": label,
                "max_ratio": TARGET_RATIO,
                "ratio": measured,
                "met": None if measured is None else measured <= TARGET_RATIO,
            }
        )
    return {
        "benchmark": "startup",
        "repeats": repeats,
        "embedder": os.environ.get("AFFECT_MEMORY_EMBEDDER") or "onnx",
        "baseline_s": None if baseline is None else round(baseline, 4),
        "cases": rows,
        "skipped": skipped,
        "targets": targets,
        "machine": machine(load_before),
    }


def format_report(report: dict[str, Any]) -> str:
    """The cases as a table, then the targets."""
    from affect_memory.formatting import format_table

    head = (
        f"start-up, median of {report['repeats']} round(s) (load "
        f"{report['machine']['load_average_1m_before']} before, "
        f"{report['machine']['load_average_1m_after']} after; embedder {report['embedder']})"
    )
    table = format_table(
        ["case", "cache", "median s", "x import chromadb", "command"],
        [
            [
                row["name"],
                row["cache"],
                f"{row['median_s']:.3f}",
                "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                row["command"],
            ]
            for row in report["cases"]
        ],
    )
    lines = [head, table, ""]
    for name, reason in report["skipped"].items():
        lines.append(f"skipped {name}: {reason}")
    for target in report["targets"]:
        if target["ratio"] is None:
            lines.append(f"target: {target['label']} <= {target['max_ratio']:g}x: not measured")
            continue
        verdict = "met" if target["met"] else "NOT met"
        lines.append(
            f"target: {target['label']} <= {target['max_ratio']:g}x import chromadb: "
            f"{target['ratio']:.2f}x, {verdict}"
        )
    return "\n".join(lines)
