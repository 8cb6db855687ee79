"""``affect-memory bench NAME``: measure a hot path and report medians as a table or JSON."""

from __future__ import annotations

import argparse
import importlib

from affect_memory.bench import BENCHMARK_MODULES

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` and every sub-benchmark of ``affect_memory.bench``."""
    parser = commands.add_parser(
        "bench",
        help="run benchmarks (speed is measured here, never by timed tests)",
        description="Measure a hot path; every sub-benchmark prints a table, or JSON with --json.",
    )
    benchmarks = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name in BENCHMARK_MODULES:
        importlib.import_module(f"affect_memory.bench.{name}").register(benchmarks)
