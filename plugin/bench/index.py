"""``affect-memory bench index``: the memory index's read latency and its share of each write.

For each backend (a SQLite file; PostgreSQL with ``--postgres URL``) and each size (1,000 and
10,000 memories of one user), a fresh embedded store is filled through ``ChromaMemory.add``
in batches (the real journal path: announce, Chroma write, settle), then queried:

* ``lexical_search`` (top 64) for held-out queries, median and p95;
* ``rehearsal`` of 64 ids and ``newest_epoch``, median and p95;
* each ``add`` batch end to end, and the index's part of it (the ``index_announce`` and
  ``index_settle`` stages the memory's observer reports), as milliseconds and a share.

Vectors are random unit vectors served by a table (the index never reads them), so the
numbers are the index's and Chroma's, not the model's. The corpus is the benches' template
sentences (every query word common: the worst case), or LoCoMo turns repeated to size, with
LoCoMo questions, given ``--data DIR``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from affect_memory.bench.common import (
    TableEmbedder,
    add_json_option,
    load_average,
    machine,
    print_report,
    sentences,
    summary_ms,
)
from affect_memory.formatting import format_table
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.store import ChromaMemory

__all__ = ["measure", "register"]

SIZES = (1_000, 10_000)
QUICK_SIZES = (300,)
BATCH = 256
QUERIES = 200
LIMIT = 64
USER = "bench-user"


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench index``."""
    parser = benchmarks.add_parser(
        "index",
        help="memory index: lexical_search and rehearsal latency, and its share of each add",
        description=(
            "Fill a fresh store per backend and size (1,000 and 10,000 memories of one user) "
            "through ChromaMemory.add, then time lexical_search (top 64), rehearsal and "
            "newest_epoch, and report the index's share of each add batch. SQLite always; "
            "PostgreSQL with --postgres URL (tables in a schema of their own, dropped after)."
        ),
    )
    add_json_option(parser)
    parser.add_argument("--quick", action="store_true", help="300 memories, SQLite only (CI)")
    parser.add_argument(
        "--postgres", metavar="URL", default=None, help="also measure a PostgreSQL index here"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="LoCoMo conversation files: their turns (repeated to size) and questions as the "
        "corpus instead of template sentences",
    )
    parser.add_argument(
        "--sizes",
        default=None,
        metavar="N,N",
        help=f"memories per store (default {','.join(str(s) for s in SIZES)})",
    )
    parser.set_defaults(handler=run)


def _sizes(text: str | None, quick: bool) -> tuple[int, ...]:
    if text is None:
        return QUICK_SIZES if quick else SIZES
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(size < 1 for size in sizes):
        raise InvalidInputError(f"--sizes takes positive counts like 1000,10000, got {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    """Measure, then print a table (or JSON with ``--json``)."""
    sizes = _sizes(args.sizes, args.quick)
    backends = ["sqlite"] + ([] if args.postgres is None or args.quick else ["postgresql"])
    report = measure(sizes, backends, postgres=args.postgres, data=args.data)
    return print_report(report, as_json=args.json, text=format_report)


def _corpus(size: int, data: Path | None) -> tuple[list[str], list[str]]:
    """``size`` memory texts and the held-out queries."""
    if data is None:
        texts = sentences(size + QUERIES, seed=1)
        return texts[:size], texts[size:]
    from affect_memory.bench.locomo_data import load_locomo

    conversations = load_locomo(data)
    turns = [str(record["text"]) for c in conversations for record in c.records]
    questions = [q.text for c in conversations for q in c.questions][:QUERIES]
    texts = [f"{turns[i % len(turns)]} ({i // len(turns)})" for i in range(size)]
    return texts, questions


def _index_url(backend: str, postgres: str | None, scratch: Path, schema: str) -> str:
    if backend == "sqlite":
        return str(scratch / f"{schema}.sqlite3")
    assert postgres is not None
    separator = "&" if "?" in postgres else "?"
    return f"{postgres}{separator}schema={schema}"


def _drop_schema(postgres: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(postgres, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _one(
    backend: str, size: int, postgres: str | None, data: Path | None, scratch: Path
) -> dict[str, Any]:
    texts, queries = _corpus(size, data)
    rng = np.random.default_rng(size)
    vectors = rng.normal(size=(len(texts), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embedder = TableEmbedder(texts, vectors, name="bench-random-unit-vectors")
    stages: dict[str, float] = {}

    def observe(stage: str, seconds: float) -> None:
        stages[stage] = stages.get(stage, 0.0) + seconds

    schema = f"bench_index_{backend}_{size}_{int(time.time())}"
    index = _index_url(backend, postgres, scratch, schema)
    chroma = scratch / f"chroma-{backend}-{size}"
    batches: list[float] = []
    shares: list[float] = []
    index_ms: list[float] = []
    try:
        with ChromaMemory(
            chroma, embedder=embedder, index=index, progress=False, observer=observe
        ) as memory:
            for first in range(0, size, BATCH):
                records = [
                    {
                        "id": f"m{i:06d}",
                        "text": texts[i],
                        "user_id": USER,
                        "timestamp": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T12:00:00Z",
                    }
                    for i in range(first, min(size, first + BATCH))
                ]
                stages.clear()
                start = time.perf_counter()
                memory.add(records, progress=False)
                elapsed = time.perf_counter() - start
                spent = stages.get("index_announce", 0.0) + stages.get("index_settle", 0.0)
                batches.append(elapsed * 1e3)
                index_ms.append(spent * 1e3)
                shares.append(spent / elapsed)
            lexical = _timed(lambda q: memory.index.lexical_search(USER, q, LIMIT), queries)
            hits = [len(memory.index.lexical_search(USER, q, LIMIT)) for q in queries]
            ids = [f"m{i:06d}" for i in range(0, size, max(1, size // LIMIT))][:LIMIT]
            rehearsal = _timed(lambda _: memory.index.rehearsal(USER, ids), queries)
            newest = _timed(lambda _: memory.index.newest_epoch(USER), queries)
            stored, indexed = memory.count(USER), memory.index.audit(USER).doc_count
    finally:
        if backend == "postgresql" and postgres is not None:
            _drop_schema(postgres, schema)
    return {
        "backend": backend,
        "memories": size,
        "stored": stored,
        "indexed": indexed,
        "lexical_search_ms": summary_ms(lexical, per_ms=1e-3),
        "mean_hits": round(float(np.mean(hits)), 1),
        "rehearsal_64_ms": summary_ms(rehearsal, per_ms=1e-3),
        "newest_epoch_ms": summary_ms(newest, per_ms=1e-3),
        "add_batch_ms": summary_ms(batches, per_ms=1.0),
        "index_per_batch_ms": summary_ms(index_ms, per_ms=1.0),
        "index_share_of_add": round(float(np.median(shares)), 4),
    }


def _timed(call: Any, items: Sequence[str]) -> list[float]:
    """Seconds of ``call(item)`` for each item, after one untimed warm-up call."""
    call(items[0])
    samples: list[float] = []
    for item in items:
        start = time.perf_counter()
        call(item)
        samples.append(time.perf_counter() - start)
    return samples


def measure(
    sizes: Sequence[int],
    backends: Sequence[str],
    *,
    postgres: str | None = None,
    data: Path | None = None,
) -> dict[str, Any]:
    """Every (backend, size); the report is JSON-ready."""
    load_before = load_average()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="affect-memory-bench-index-") as scratch:
        for backend in backends:
            for size in sizes:
                print(f"bench index: {backend}, {size:,} memories", file=sys.stderr)
                rows.append(_one(backend, size, postgres, data, Path(scratch)))
    return {
        "benchmark": "index",
        "corpus": "LoCoMo turns and questions" if data is not None else "template sentences",
        "batch": BATCH,
        "limit": LIMIT,
        "rows": rows,
        "notes": [
            f"one user; add in batches of {BATCH} through ChromaMemory.add (journal, Chroma, "
            "settle); index share = the announce and settle transactions over the whole add",
            f"lexical_search top {LIMIT} over {QUERIES} held-out queries; rehearsal of 64 ids",
            "random unit vectors from a table: no model time in any figure",
        ],
        "machine": machine(load_before),
    }


def format_report(report: dict[str, Any]) -> str:
    """One row per backend and size, then the notes and the machine."""
    rows = [
        [
            r["backend"],
            f"{r['memories']:,}",
            f"{r['lexical_search_ms']['median']:.2f} / {r['lexical_search_ms']['p95']:.2f}",
            r["mean_hits"],
            f"{r['rehearsal_64_ms']['median']:.2f} / {r['rehearsal_64_ms']['p95']:.2f}",
            f"{r['newest_epoch_ms']['median']:.2f} / {r['newest_epoch_ms']['p95']:.2f}",
            f"{r['add_batch_ms']['median']:.1f} / {r['add_batch_ms']['p95']:.1f}",
            f"{r['index_per_batch_ms']['median']:.1f}",
            f"{r['index_share_of_add']:.0%}",
        ]
        for r in report["rows"]
    ]
    table = format_table(
        [
            "backend",
            "memories",
            "lexical p50 / p95 ms",
            "hits",
            "rehearsal p50 / p95 ms",
            "newest p50 / p95 ms",
            f"add {report['batch']} p50 / p95 ms",
            "index ms / batch",
            "index share",
        ],
        rows,
    )
    m = report["machine"]
    lines = [f"corpus: {report['corpus']}", table, *(f"- {note}" for note in report["notes"])]
    lines.append(
        f"chromadb {m['chromadb']}, {m['cpus']} CPUs, load average "
        f"{m['load_average_1m_before']} before, {m['load_average_1m_after']} after"
    )
    return "\n".join(lines)
