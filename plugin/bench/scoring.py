"""``affect-memory bench scoring``: the scalar reference scorer against the columnar one.

Both paths rank the same synthetic candidates, side by side in one run, and the report gives
candidates per second (medians over repeats), their ratio, and a memory-bandwidth estimate
that says how close the columnar path gets to the machine's limit.

* scalar: ``MemoryCandidate`` objects (ISO timestamps, parsed per candidate) through one
  ``score_candidate`` each, dedupe, full sort, cut -- the pre-columnar ``rank_candidates``.
* columnar: numpy columns (epoch-second timestamps, ids as a numpy str array) through
  ``score_batch`` (validation included) and ``rank_batch`` to the top-k indices.

One benchmark in one module (about 460 lines): the synthetic batch, the interleaved timing of
both paths, the bandwidth floor and the report are read together to judge one ratio.

The module is about 460 lines because the two paths, their shared synthetic candidates, the timing
and the bandwidth estimate make one side-by-side report; split, the fairness of the comparison could
not be checked in one place.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from affect_memory.bench.common import add_json_option, load_average, print_report
from affect_memory.formatting import format_table
from affect_memory.kernel.batch import rank_batch, score_batch
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.retrieval import rank_candidates_reference

__all__ = ["ScoringPlan", "measure", "register"]

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
"""The fixed clock of the synthetic batch (scores do not depend on the wall clock)."""

MOOD_VALENCE = -0.45
"""A clearly negative mood, so the congruence factor is applied (the costlier path)."""

INPUT_BYTES_PER_CANDIDATE = 8 + 8 + 8 + 8 + 1 + 8
"""distance, timestamp, significance, recall count (int64), episode flag, valence."""

OUTPUT_BYTES_PER_CANDIDATE = 6 * 8
"""score, similarity, recency, salience, congruence and bonus, float64 each."""

BANDWIDTH_MIN_BYTES = 64 * 2**20


@dataclass(frozen=True)
class ScoringPlan:
    """Sizes, repeats and the subsample the scalar path is measured on beyond ``scalar_cap``."""

    sizes: tuple[int, ...]
    columnar_repeats: Callable[[int], int]
    scalar_repeats: Callable[[int], int]
    scalar_cap: int
    limit: int = 6
    seed: int = 0


def _full_columnar_repeats(n: int) -> int:
    return 301 if n <= 1_000 else 31 if n <= 100_000 else 11


def _full_scalar_repeats(n: int) -> int:
    return 51 if n <= 1_000 else 5


FULL_PLAN = ScoringPlan(
    sizes=(64, 1_000, 100_000, 1_000_000),
    columnar_repeats=_full_columnar_repeats,
    scalar_repeats=_full_scalar_repeats,
    scalar_cap=100_000,
)
QUICK_PLAN = ScoringPlan(
    sizes=(64, 1_000, 20_000),
    columnar_repeats=lambda n: 21,
    scalar_repeats=lambda n: 3,
    scalar_cap=2_000,
)


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench scoring``."""
    parser = benchmarks.add_parser(
        "scoring",
        help="candidates/s of the scalar and the columnar scorer at 64 to 1,000,000 candidates",
        description=(
            "Rank the same synthetic candidates with the scalar reference path and the columnar "
            "path, side by side, and report candidates per second (medians), their ratio and "
            "an estimate of memory bandwidth. The scalar path beyond 100,000 candidates is "
            "measured on a 100,000-candidate subsample and extrapolated."
        ),
    )
    add_json_option(parser)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and few repeats (for CI)"
    )
    parser.add_argument("--limit", type=int, default=6, help="top-k to rank (default 6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic batch")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print a table (or JSON with ``--json``)."""
    base = QUICK_PLAN if args.quick else FULL_PLAN
    plan = ScoringPlan(
        sizes=base.sizes,
        columnar_repeats=base.columnar_repeats,
        scalar_repeats=base.scalar_repeats,
        scalar_cap=base.scalar_cap,
        limit=args.limit,
        seed=args.seed,
    )
    report = measure(plan, progress=not args.quick)
    return print_report(report, as_json=args.json, text=format_report)


# ---------------------------------------------------------------- synthetic batch


@dataclass(frozen=True)
class _Batch:
    ids: npt.NDArray[np.str_]
    columns: dict[str, npt.NDArray[Any]]

    def head(self, count: int) -> list[MemoryCandidate]:
        """The first ``count`` rows as validated candidates with ISO timestamps."""
        c = self.columns
        return [
            MemoryCandidate(
                id=str(self.ids[i]),
                text="",  # synthetic rows have no text; scoring never reads it
                distance=float(c["distances"][i]),
                timestamp=None
                if np.isnan(c["timestamps"][i])
                else datetime.fromtimestamp(float(c["timestamps"][i]), UTC).isoformat(),
                significance=float(c["significance"][i]),
                recall_count=int(c["recall_counts"][i]),
                episode=bool(c["episodes"][i]),
                emotional_valence=float(c["memory_valences"][i]),
            )
            for i in range(count)
        ]


def _synthetic(n: int, rng: np.random.Generator) -> _Batch:
    """Plausible retrieval results: 5% without a timestamp, a few from the future."""
    moments = np.round(NOW.timestamp() - rng.uniform(-2 * 86400, 120 * 86400, n), 3)
    moments[rng.random(n) < 0.05] = np.nan
    recalls = rng.geometric(0.3, n) - 1
    recalls[rng.random(n) < 0.01] = 1_000
    valences = rng.uniform(-1.0, 1.0, n)
    valences[rng.random(n) < 0.1] = 0.0
    return _Batch(
        ids=np.array([f"mem-{i:08d}" for i in rng.permutation(n)]),
        columns={
            "distances": rng.uniform(0.2, 1.4, n),
            "timestamps": moments,
            "significance": rng.random(n),
            "recall_counts": recalls.astype(np.int64),
            "episodes": rng.random(n) < 0.1,
            "memory_valences": valences,
        },
    )


def _columnar(batch: _Batch, limit: int) -> Callable[[], object]:
    c = batch.columns

    def call() -> object:
        scores = score_batch(
            c["distances"],
            timestamps=c["timestamps"],
            significance=c["significance"],
            recall_counts=c["recall_counts"],
            episodes=c["episodes"],
            memory_valences=c["memory_valences"],
            now=NOW,
            mood_valence=MOOD_VALENCE,
        )
        return rank_batch(batch.ids, scores.score, limit)

    return call


def _plain_numpy(batch: _Batch, limit: int) -> Callable[[], object]:
    """The formula as one naive numpy expression: no validation, no dedupe, inexact ties."""
    c = batch.columns
    now = NOW.timestamp()

    def call() -> object:
        age = (now - c["timestamps"]) / 86400.0
        recency = np.where(np.isnan(age), 0.70, np.clip(1.0 - age / 60.0, 0.40, 1.0))
        recall = np.minimum(0.025, 0.006 * np.log1p(c["recall_counts"]))
        salience = 1.0 + 0.03 * np.clip(c["significance"], 0.0, 1.0) + recall
        score = (1.0 - c["distances"] / 2.0) * recency * salience + 0.05 * c["episodes"]
        score *= np.where(c["memory_valences"] < 0, 1.06, 1.0)
        top = np.argpartition(score, -limit)[-limit:]
        return top[np.lexsort((batch.ids[top], -score[top]))]

    return call


def _scalar(candidates: list[MemoryCandidate], limit: int) -> Callable[[], object]:
    def call() -> object:
        return rank_candidates_reference(candidates, NOW, MOOD_VALENCE, limit)

    return call


# ---------------------------------------------------------------- timing


def _time_ns(call: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - start


def _timed(call: Callable[[], object]) -> tuple[int, int]:
    """Wall and CPU (this thread) nanoseconds of one call, with the collector paused as
    ``timeit`` does, so neither path pays for collecting the benchmark's own objects."""
    gc.disable()
    try:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        call()
        return time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
    finally:
        gc.enable()


@contextmanager
def _bar(total: int, enabled: bool) -> Iterator[Callable[[str, int], None]]:
    """A tqdm bar of timed calls on stderr when enabled and stderr is a terminal."""
    if not enabled:
        yield lambda label, count: None
        return
    from tqdm import tqdm

    with tqdm(total=total, file=sys.stderr, unit="call", leave=False, disable=None) as bar:

        def step(label: str, count: int) -> None:
            bar.set_description(label, refresh=False)
            bar.update(count)

        yield step


def _interleaved(
    columnar: Callable[[], object],
    columnar_repeats: int,
    scalar: Callable[[], object],
    scalar_repeats: int,
    step: Callable[[str, int], None],
    label: str,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median (wall, CPU) seconds per call of each path, columnar first, alternating the
    paths so both see the same machine."""
    columnar()
    scalar()  # warm caches, imports and the recall table
    columnar_ns: list[tuple[int, int]] = []
    scalar_ns: list[tuple[int, int]] = []
    gc.collect()
    per_scalar = max(1, columnar_repeats // scalar_repeats)
    while len(scalar_ns) < scalar_repeats or len(columnar_ns) < columnar_repeats:
        if len(scalar_ns) < scalar_repeats:
            scalar_ns.append(_timed(scalar))
            step(f"{label} scalar", 1)
        chunk = min(per_scalar, columnar_repeats - len(columnar_ns))
        columnar_ns.extend(_timed(columnar) for _ in range(chunk))
        step(f"{label} columnar", chunk)
    return _medians(columnar_ns), _medians(scalar_ns)


def _medians(samples: list[tuple[int, int]]) -> tuple[float, float]:
    return (
        statistics.median(wall for wall, _ in samples) / 1e9,
        statistics.median(cpu for _, cpu in samples) / 1e9,
    )


def _row(n: int, sample: int, columnar_s: float, scalar_s: float) -> dict[str, float | int]:
    scalar_per_s = sample / scalar_s
    columnar_per_s = n / columnar_s
    return {
        "n": n,
        "scalar_per_s": scalar_per_s,
        "columnar_per_s": columnar_per_s,
        "ratio": columnar_per_s / scalar_per_s,
    }


def _bandwidth(nbytes: int, repeats: int = 7) -> dict[str, float]:
    """Copy and read bandwidth over ``nbytes`` of float64 (medians, GB/s: bytes per ns)."""
    source = np.random.default_rng(1).random(max(1, nbytes // 8))
    target = np.empty_like(source)
    np.copyto(target, source)
    copies = [_time_ns(lambda: np.copyto(target, source)) for _ in range(repeats)]
    reads = [_time_ns(lambda: np.add.reduce(source)) for _ in range(repeats)]
    size = source.nbytes
    return {
        "bytes": float(size),
        "copy_gb_per_s": 2 * size / statistics.median(copies),  # read + write
        "read_gb_per_s": size / statistics.median(reads),
    }


def measure(plan: ScoringPlan, *, progress: bool = False) -> dict[str, Any]:
    """Run the plan and return the report: rows, bandwidth, notes and the machine."""
    rng = np.random.default_rng(plan.seed)
    rows: list[dict[str, float | int]] = []
    cpu_rows: list[dict[str, float | int]] = []
    load_before = load_average()
    scalar_samples: dict[str, int] = {}
    columnar_seconds: dict[str, float] = {}
    steps = sum(plan.scalar_repeats(n) + plan.columnar_repeats(n) for n in plan.sizes)
    steps += 2 * plan.columnar_repeats(max(plan.sizes))
    plain: dict[str, float | int] = {}
    with _bar(steps, progress) as step:
        for n in plan.sizes:
            batch = _synthetic(n, rng)
            sample = min(n, plan.scalar_cap)
            candidates = batch.head(sample)
            (columnar_s, columnar_cpu), (scalar_s, scalar_cpu) = _interleaved(
                _columnar(batch, plan.limit),
                plan.columnar_repeats(n),
                _scalar(candidates, plan.limit),
                plan.scalar_repeats(n),
                step,
                f"n={n:,}",
            )
            del candidates
            if n == max(plan.sizes):
                # The same batch once more: the columnar path against a naive numpy expression.
                (columnar_again, _), (plain_s, plain_cpu) = _interleaved(
                    _columnar(batch, plan.limit),
                    plan.columnar_repeats(n),
                    _plain_numpy(batch, plan.limit),
                    plan.columnar_repeats(n),
                    step,
                    f"n={n:,} plain numpy",
                )
                plain = {
                    "n": n,
                    "plain_numpy_per_s": n / plain_s,
                    "plain_numpy_cpu_per_s": n / plain_cpu,
                    "columnar_per_s_same_run": n / columnar_again,
                }
            rows.append(_row(n, sample, columnar_s, scalar_s))
            cpu_rows.append(_row(n, sample, columnar_cpu, scalar_cpu))
            columnar_seconds[str(n)] = columnar_s
            if sample < n:
                scalar_samples[str(n)] = sample
    largest = max(plan.sizes)
    # Never less than 64 MB, so the estimate is of memory rather than of a cache.
    bandwidth = _bandwidth(max(largest * INPUT_BYTES_PER_CANDIDATE, BANDWIDTH_MIN_BYTES))
    per_candidate = INPUT_BYTES_PER_CANDIDATE + OUTPUT_BYTES_PER_CANDIDATE
    floor_per_s = bandwidth["copy_gb_per_s"] * 1e9 / per_candidate
    bandwidth.update(
        {
            "bytes_per_candidate": float(per_candidate),
            "floor_candidates_per_s": floor_per_s,
            "columnar_fraction_of_floor": rows[-1]["columnar_per_s"] / floor_per_s,
            "columnar_cpu_fraction_of_floor": cpu_rows[-1]["columnar_per_s"] / floor_per_s,
        }
    )
    notes = [
        "scalar: MemoryCandidate objects (ISO timestamps) -> score_candidate each -> dedupe, "
        "sort, cut (ScoredCandidate models for every candidate)",
        "columnar: numpy columns (epoch-second timestamps, numpy str ids) -> score_batch "
        f"(with validation) -> rank_batch top-{plan.limit} indices",
        f"mood valence {MOOD_VALENCE} (congruence applied), ids unique, 5% missing timestamps",
        "rows: wall-clock medians (perf_counter_ns); cpu_time_rows: this thread's CPU time "
        "(thread_time_ns), which excludes waiting for a core on a busy machine; the garbage "
        "collector is paused during each timed call, as timeit does",
    ]
    notes.extend(
        f"scalar at n={int(n):,} measured on the first {sample:,} candidates and extrapolated "
        "(its cost per candidate is flat in n)"
        for n, sample in scalar_samples.items()
    )
    notes.append(
        f"bandwidth floor: {per_candidate} bytes per candidate (inputs read once, outputs "
        "written once) at the measured copy bandwidth"
    )
    return {
        "rows": rows,
        "cpu_time_rows": cpu_rows,
        "limit": plan.limit,
        "columnar_seconds": columnar_seconds,
        "scalar_sample": scalar_samples,
        "bandwidth": bandwidth,
        "plain_numpy": plain,
        "notes": notes,
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count() or 0,
            "load_average_1m_before": load_before,
            "load_average_1m_after": load_average(),
        },
    }


def format_report(report: dict[str, Any]) -> str:
    """The rows as a table (wall clock, then CPU time), then bandwidth and notes."""
    samples = report["scalar_sample"]

    def table(rows: list[dict[str, Any]], extras: list[tuple[object, ...]]) -> str:
        headers = ["n", "scalar cand/s", "columnar cand/s", "ratio"]
        if extras:
            headers += ["columnar ms", "scalar on"]
        cells: list[list[object]] = []
        for i, row in enumerate(rows):
            rates = [float(row[key]) for key in ("scalar_per_s", "columnar_per_s", "ratio")]
            cells.append([row["n"], *rates, *(extras[i] if extras else ())])
        return format_table(headers, cells)

    extras: list[tuple[object, ...]] = [
        (
            report["columnar_seconds"][str(row["n"])] * 1e3,
            f"{samples[str(row['n'])]:,} (extrapolated)" if str(row["n"]) in samples else "all",
        )
        for row in report["rows"]
    ]
    bw = report["bandwidth"]
    plain = report["plain_numpy"]
    machine = report["machine"]
    lines = [
        "wall clock (medians):",
        table(report["rows"], extras),
        "",
        "CPU time of this thread (medians):",
        table(report["cpu_time_rows"], []),
        "",
        f"memory bandwidth: copy {bw['copy_gb_per_s']:.1f} GB/s, read {bw['read_gb_per_s']:.1f} "
        f"GB/s over {bw['bytes'] / 1e6:.0f} MB; floor {bw['floor_candidates_per_s'] / 1e6:.0f}M "
        f"candidates/s at {bw['bytes_per_candidate']:.0f} B each; the largest size reaches "
        f"{bw['columnar_fraction_of_floor']:.0%} of it (CPU time: "
        f"{bw['columnar_cpu_fraction_of_floor']:.0%})",
        f"plain numpy expression of the formula at n={plain['n']:,} (no validation, no "
        f"dedupe, inexact ties): {plain['plain_numpy_per_s'] / 1e6:.1f}M candidates/s wall, "
        f"{plain['plain_numpy_cpu_per_s'] / 1e6:.1f}M CPU; columnar in the same run "
        f"{plain['columnar_per_s_same_run'] / 1e6:.1f}M wall",
        f"machine: {machine['cpus']} CPUs, numpy {machine['numpy']}, load average "
        f"{machine['load_average_1m_before']:.2f} before, {machine['load_average_1m_after']:.2f} "
        "after",
    ]
    lines.extend(f"- {note}" for note in report["notes"])
    return "\n".join(lines)
