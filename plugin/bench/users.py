"""``affect-memory bench users``: many users' collections: peak memory and the first query after
a restart, embedded and over ``chroma run``, with Chroma's index cache bounded or not.

Each layout (``10x10000`` is 10 users with 10,000 memories each) is built once through
``ChromaMemory.add`` (random unit vectors served by a table, so no model runs). Then every
measurement runs in a fresh process, as after a restart: it opens the store, queries each
user once in a shuffled order (the *first query*: Chroma loads that user's index), then once
more in another order (*later*: cached, or reloaded when the cache evicted it), through
``ChromaMemory.recall`` with ``DENSE_RECALL`` over 64 candidates, embedding excluded (a table
serves each query's random vector). Peak memory is the
measuring process's peak RSS (embedded) or the server's (``VmHWM``), read when it is done.

Modes: ``embedded`` (Chroma's own bound, ``RLIMIT_NOFILE // 5`` indexes), ``embedded-cache``
(``ChromaMemory(index_cache=N)``) and ``server-cache`` (``chroma run`` with the YAML index
cache ``capacity: N, shards: 1``). A loaded index costs about 2.6 MB plus 2.7 KB per memory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from affect_memory.bench.common import (
    BENCH_NOW,
    TableEmbedder,
    add_json_option,
    load_average,
    machine,
    print_report,
    summary_ms,
)

__all__ = ["Layout", "measure", "register"]

EMBEDDER_NAME = "bench-random-unit-vectors"
CANDIDATES = 64
DEFAULT_CACHE = 200
"""Indexes the bounded modes keep loaded (with 100 memories each, about 600 MB)."""
MODES = ("embedded", "embedded-cache", "server-cache")


@dataclass(frozen=True)
class Layout:
    """``users`` users with ``per_user`` memories each."""

    users: int
    per_user: int

    @property
    def tag(self) -> str:
        """``USERSxPER_USER``."""
        return f"{self.users}x{self.per_user}"


def _layouts(text: str) -> tuple[Layout, ...]:
    try:
        found = tuple(
            Layout(*(int(part.replace("_", "")) for part in item.split("x")))
            for item in text.split(",")
            if item.strip()
        )
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"--layouts takes USERSxPER_USER,... like 10x10000,1000x100, got {text!r}"
        ) from None
    if not found or any(layout.users < 1 or layout.per_user < 1 for layout in found):
        raise argparse.ArgumentTypeError(f"every layout needs users and memories, got {text!r}")
    return found


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [mode for mode in modes if mode not in MODES]
    if not modes or unknown:
        raise argparse.ArgumentTypeError(f"--modes takes some of {', '.join(MODES)}, got {text!r}")
    return modes


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench users``."""
    parser = benchmarks.add_parser(
        "users",
        help="many users: peak memory and first-query latency after a restart",
        description=(
            "Build stores of many users (default 10 users x 10,000 memories and 1,000 x 100), "
            "then, in a fresh process as after a restart, query every user once (first query) "
            "and again (later), embedding excluded: p50/p95 and peak memory, embedded with "
            "Chroma's default index cache, embedded with index_cache=N, and over chroma run "
            "with its YAML cache of N indexes."
        ),
    )
    add_json_option(parser)
    parser.add_argument("--quick", action="store_true", help="one small layout (CI)")
    parser.add_argument(
        "--layouts",
        type=_layouts,
        default=None,
        help="USERSxPER_USER,... (default 10x10000,1000x100)",
    )
    parser.add_argument("--modes", type=_modes, default=MODES, help=f"of {', '.join(MODES)}")
    parser.add_argument(
        "--cache", type=int, default=DEFAULT_CACHE, metavar="N",
        help=f"indexes the bounded modes keep loaded (default {DEFAULT_CACHE})",
    )  # fmt: skip
    parser.add_argument(
        "--keep", type=Path, default=None, metavar="DIR", help="build in DIR and reuse"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of vectors and query order")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print a table (or JSON with ``--json``)."""
    from affect_memory.kernel.errors import InvalidInputError

    layouts = args.layouts or (
        (Layout(12, 50),) if args.quick else (Layout(10, 10_000), Layout(1_000, 100))
    )
    if args.cache < 8:
        raise InvalidInputError(f"--cache must be at least 8 indexes, got {args.cache}")
    report = measure(
        layouts, modes=args.modes, cache=args.cache, keep=args.keep, seed=args.seed,
        progress=not args.quick,
    )  # fmt: skip
    return print_report(report, as_json=args.json, text=format_report)


# ---------------------------------------------------------------- building


def _unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def _user(index: int) -> str:
    return f"user-{index:05d}"


def _build(store: Path, layout: Layout, seed: int, progress: bool) -> float | None:
    """Build the layout's store (or reuse a whole one); seconds taken, None when reused."""
    from affect_memory.memory.store import ChromaMemory

    total = layout.users * layout.per_user
    texts = [f"memory {i} of {_user(i // layout.per_user)}" for i in range(total)]
    embedder = TableEmbedder(texts, _unit_vectors(total, seed), name=EMBEDDER_NAME)
    with ChromaMemory(store, embedder=embedder, progress=progress) as memory:
        stored = memory.count()
        if stored == total:
            return None
        if stored:
            raise RuntimeError(f"{store} holds {stored} memories, not {total}: delete it")
        start = time.perf_counter()
        step = max(1, 4096 // layout.per_user)
        for first in range(0, layout.users, step):
            rows = range(first * layout.per_user, min(layout.users, first + step) * layout.per_user)
            records = [
                {
                    "id": f"m{i % layout.per_user}",
                    "text": texts[i],
                    "user_id": _user(i // layout.per_user),
                    "timestamp": BENCH_NOW.timestamp() - 3600.0 * (i % 500),
                }
                for i in rows
            ]
            memory.add(records, progress=False)
        return time.perf_counter() - start


# ---------------------------------------------------------------- measuring, in a fresh process


def _probe(location: str, layout: Layout, cache: int | None, seed: int) -> dict[str, Any]:
    """Open the store, query every user twice (shuffled), report times and peak RSS."""
    from affect_memory.memory.settings import DENSE_RECALL, resolve_settings
    from affect_memory.memory.store import ChromaMemory

    texts = [f"q{number}" for number in range(2 * layout.users)]
    embedder = TableEmbedder(
        texts, _unit_vectors(2 * layout.users, seed + 2), name=EMBEDDER_NAME
    )  # each query text is served its own random vector
    dense = resolve_settings(DENSE_RECALL, candidates=CANDIDATES)
    opened = time.perf_counter_ns()
    memory = ChromaMemory(location, embedder=embedder, create=False, index_cache=cache)
    open_ns = time.perf_counter_ns() - opened
    order = list(range(layout.users))
    rng = random.Random(seed)
    passes: list[list[int]] = []
    failures = 0
    with memory:
        for number in range(2):
            rng.shuffle(order)
            times: list[int] = []
            for position, index in enumerate(order):
                text = texts[number * layout.users + position]
                start = time.perf_counter_ns()
                try:
                    memory.recall(text, _user(index), now=BENCH_NOW, top_k=6, settings=dense)
                except Exception:
                    failures += 1
                    continue
                times.append(time.perf_counter_ns() - start)
            passes.append(times)
        index_cache = memory.index_cache
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over an exec from the parent that forked.
    peak = _peak_rss_mb(os.getpid())
    return {
        "open_ms": round(open_ns / 1e6, 1),
        "first_query_ms": summary_ms(passes[0]) if passes[0] else None,
        "later_query_ms": summary_ms(passes[1]) if passes[1] else None,
        "failures": failures,
        "client_peak_rss_mb": peak,
        "index_cache": index_cache,
    }


def _run_probe(location: str, layout: Layout, cache: int | None, seed: int) -> dict[str, Any]:
    """``_probe`` in a new Python process (a restart), its JSON result."""
    command = [
        sys.executable, "-m", "affect_memory.bench.users", "--probe", location, layout.tag,
        str(cache or 0), str(seed),
    ]  # fmt: skip
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@contextmanager
def _server(store: Path, cache: int) -> Iterator[tuple[str, int]]:
    """``chroma run`` on the store with an index cache of ``cache`` indexes in one LRU."""
    from affect_memory.bench.servers import chroma_command, free_port

    port = free_port()
    config = store.parent / f"{store.name}-chroma.yaml"
    config.write_text(
        f'persist_path: "{store}"\nport: {port}\nlisten_address: "127.0.0.1"\n'
        "segment_manager:\n  hnsw_index_pool_cache_config:\n    memory:\n"
        f"      capacity: {cache}\n      shards: 1\n",
        encoding="utf-8",
    )
    with (store.parent / f"{store.name}-chroma.log").open("wb") as log:
        process = subprocess.Popen(
            [chroma_command(), "run", str(config)], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                        break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"chroma run did not start; see {log.name}") from None
                    time.sleep(0.2)
            yield url, process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _peak_rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def measure(
    layouts: tuple[Layout, ...],
    *,
    modes: tuple[str, ...] = MODES,
    cache: int = DEFAULT_CACHE,
    keep: Path | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Build each layout, measure it in every mode, return the JSON-ready report."""
    load_before = load_average()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="affect-memory-users-") as scratch:
        root = keep if keep is not None else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        for layout in layouts:
            store = root / f"users-{layout.tag}-seed{seed}"
            built = _build(store, layout, seed, progress)
            base = {"layout": layout.tag, "users": layout.users, "per_user": layout.per_user,
                    "build_seconds": None if built is None else round(built, 1)}  # fmt: skip
            for mode in modes:
                if mode == "server-cache":
                    with _server(store, cache) as (url, pid):
                        result = _run_probe(url, layout, None, seed)
                        result["server_peak_rss_mb"] = _peak_rss_mb(pid)
                    result["index_cache"] = cache
                else:
                    bound = cache if mode == "embedded-cache" else None
                    result = _run_probe(str(store), layout, bound, seed)
                rows.append({**base, "mode": mode, **result})
    return {
        "benchmark": "users",
        "candidates": CANDIDATES,
        "rows": rows,
        "machine": machine(load_before),
    }


def format_report(report: dict[str, Any]) -> str:
    """One table: layout, mode, cache, first and later query, peak memory."""
    from affect_memory.formatting import format_table

    def cell(summary: dict[str, float] | None) -> str:
        return "-" if summary is None else f"{summary['median']:.1f} / {summary['p95']:.1f}"

    cells = [
        [r["layout"], r["mode"], r["index_cache"], cell(r["first_query_ms"]),
         cell(r["later_query_ms"]), r["failures"], r["client_peak_rss_mb"],
         r.get("server_peak_rss_mb") or "-"]
        for r in report["rows"]
    ]  # fmt: skip
    headers = ["layout", "mode", "cache", "first query ms", "later ms", "failed",
               "client peak RSS MB", "server peak RSS MB"]  # fmt: skip
    return format_table(headers, cells) + "\n(query times: median / p95, embedding excluded)"


def _main(argv: list[str]) -> int:
    """The measuring process: ``--probe LOCATION LAYOUT CACHE SEED``."""
    if len(argv) != 5 or argv[0] != "--probe":
        print(
            "usage: python -m affect_memory.bench.users --probe LOCATION USERSxPER CACHE SEED",
            file=sys.stderr,
        )
        return 2
    (layout,) = _layouts(argv[2])
    cache = int(argv[3]) or None
    print(json.dumps(_probe(argv[1], layout, cache, int(argv[4]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
