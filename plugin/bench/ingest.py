"""``affect-memory bench ingest``: memories per second through ``ChromaMemory.add``, by batch size.

Each batch size fills a fresh embedded collection (created with the plugin's HNSW settings)
from the same deterministic corpus, one ``add`` call per batch: validation, the id lookup,
embedding with the real model and the Chroma write, end to end. The embedder is wrapped in a
timer (``TimedEmbedder``) and validation is timed on its own beside each call, so the report
splits a memory's cost into embed, validate and write (the rest of ``add``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.bench.common import (
    TimedEmbedder,
    add_json_option,
    load_average,
    machine,
    memory_records,
    print_report,
    sentences,
    summary_ms,
)
from affect_memory.cli.formatting import format_table
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.batches import validate_records
from affect_memory.memory.collections import DEFAULT_HNSW
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder, check_embeddings, default_embedder

__all__ = ["IngestPlan", "measure", "register"]


@dataclass(frozen=True)
class IngestPlan:
    """Batch sizes and how many memories each fills its collection with."""

    batch_sizes: tuple[int, ...] = (16, 64, 256, 1024)
    memories: int = 2048
    users: int = 10
    seed: int = 0


FULL_PLAN = IngestPlan()
QUICK_PLAN = IngestPlan(batch_sizes=(16, 64), memories=128)


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench ingest``."""
    parser = benchmarks.add_parser(
        "ingest",
        help="memories/s through ChromaMemory.add (real embeddings + writes) by batch size",
        description=(
            "Ingest the same synthetic sentences into a fresh embedded collection per batch "
            "size (16, 64, 256, 1024) through ChromaMemory.add, and report memories/s end to "
            "end with the time split into embedding, validation and the Chroma write."
        ),
    )
    add_json_option(parser)
    parser.add_argument(
        "--quick", action="store_true", help="128 memories at batch sizes 16 and 64 (for CI)"
    )
    parser.add_argument(
        "--memories", type=int, default=None, help="memories per batch size (default 2048)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print a table (or JSON with ``--json``)."""
    base = QUICK_PLAN if args.quick else FULL_PLAN
    memories = base.memories if args.memories is None else args.memories
    if isinstance(memories, bool) or memories < max(base.batch_sizes):
        raise InvalidInputError(
            f"--memories must be at least the largest batch ({max(base.batch_sizes)}), "
            f"got {memories!r}"
        )
    plan = IngestPlan(batch_sizes=base.batch_sizes, memories=memories, seed=args.seed)
    report = measure(plan, progress=not args.quick)
    return print_report(report, as_json=args.json, text=format_report)


def measure(plan: IngestPlan, *, progress: bool = False) -> dict[str, Any]:
    """Ingest the corpus once per batch size; the report is JSON-ready."""
    from tqdm import tqdm

    load_before = load_average()
    model = default_embedder()
    check_embeddings(model.embed_documents(["warm the model up"] * 8), 8)
    records = memory_records(
        sentences(plan.memories, seed=plan.seed), users=plan.users, seed=plan.seed
    )
    rows: list[dict[str, Any]] = []
    total = plan.memories * len(plan.batch_sizes)
    with (
        tempfile.TemporaryDirectory(prefix="affect-memory-ingest-") as scratch,
        tqdm(
            total=total,
            unit="memory",
            file=sys.stderr,
            leave=False,
            disable=not progress or None,
        ) as bar,
    ):
        for size in plan.batch_sizes:
            bar.set_description(f"batch {size}")
            rows.append(_one_size(Path(scratch), records, size, model, bar.update))
    return {
        "benchmark": "ingest",
        "memories_per_batch_size": plan.memories,
        "model": model.name,
        "hnsw": DEFAULT_HNSW.model_dump(),
        "rows": rows,
        "notes": [
            "end to end: ChromaMemory.add per batch (validation, id lookup, embedding, write) "
            "into a fresh embedded collection per batch size",
            "embed: time inside the embedder (sentence-transformers, batch_size 64; add embeds "
            "in chunks of at most 512); validate: validate_records on the same batch, timed "
            "beside the call; write: the rest of add (id lookup, metadata, Chroma add)",
        ],
        "machine": machine(load_before),
    }


def _one_size(
    root: Path,
    records: list[dict[str, Any]],
    size: int,
    model: Embedder,
    advance: Any,
) -> dict[str, Any]:
    timed = TimedEmbedder(model)
    memory = ChromaMemory(root / f"batch-{size}", embedder=timed, progress=False)
    batches: list[int] = []
    validate_ns = 0
    try:
        for first in range(0, len(records), size):
            batch = records[first : first + size]
            start = time.perf_counter_ns()
            validate_records(batch)
            validate_ns += time.perf_counter_ns() - start
            start = time.perf_counter_ns()
            written = memory.add(batch, progress=False).written
            batches.append(time.perf_counter_ns() - start)
            if written != len(batch):
                raise RuntimeError(f"ingest wrote {written} of {len(batch)} memories")
            advance(len(batch))
        stored = memory.count()
    finally:
        memory.close()
    count = len(records)
    total_s = sum(batches) / 1e9
    embed_s = timed.elapsed_ns / 1e9
    validate_s = validate_ns / 1e9
    write_s = max(total_s - embed_s - validate_s, 1e-9)
    return {
        "batch_size": size,
        "memories": count,
        "stored": stored,
        "seconds": round(total_s, 3),
        "memories_per_s": round(count / total_s, 1),
        "embed_per_s": round(count / embed_s, 1),
        "write_per_s": round(count / write_s, 1),
        "share": {
            "embed": round(embed_s / total_s, 4),
            "validate": round(validate_s / total_s, 4),
            "write": round(write_s / total_s, 4),
        },
        "batch_ms": summary_ms(batches),
    }


def format_report(report: dict[str, Any]) -> str:
    """One row per batch size, then the notes and the machine."""
    rows = [
        [
            r["batch_size"],
            r["memories"],
            r["memories_per_s"],
            r["embed_per_s"],
            r["write_per_s"],
            f"{r['share']['embed']:.0%} / {r['share']['validate']:.0%} / {r['share']['write']:.0%}",
            r["batch_ms"]["median"],
            r["batch_ms"]["p95"],
        ]
        for r in report["rows"]
    ]
    table = format_table(
        [
            "batch",
            "memories",
            "memories/s",
            "embed only/s",
            "write only/s",
            "embed / validate / write",
            "batch median ms",
            "batch p95 ms",
        ],
        rows,
    )
    m = report["machine"]
    lines = [table, *(f"- {note}" for note in report["notes"])]
    lines.append(
        f"model {report['model']}; chromadb {m['chromadb']}, {m['cpus']} CPUs, load average "
        f"{m['load_average_1m_before']} before, {m['load_average_1m_after']} after"
    )
    return "\n".join(lines)
