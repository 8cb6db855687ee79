"""``affect-memory bench ingest``: texts/s through ``ChromaMemory.add`` beside the bare embedder's.

Two kinds of text, in one run: short (one memory sentence each, ``common.sentences``) and long
(LongMemEval-style chat turns that fill the model's 256 word pieces, ``chat_turns.long_turns``).
For each kind, on the same texts:

- the bare embedder: ``OnnxEmbedder.embed_documents`` alone, in the calls an ``add`` makes
  (each user's texts in chunks of ``WRITE_CHUNK``), on every core (the batch default) and on
  one thread;
- ingest end to end: one ``ChromaMemory.add`` of every text into a fresh embedded store
  (validation, the id lookup, embedding, the index's journal, the Chroma writes), with today's
  defaults (every core, the next chunk embedded while one is written), on every core without
  embedding ahead, and as the default was before both (one thread, no embedding ahead).

Each row is set beside the bare embedder on its own thread count (``× bare``) and beside the
old default's ingest (``× old default``). With ``--rounds N`` the runs go round-robin N times
and each row keeps its best, so a load that comes and goes weighs on every row alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.bench.chat_turns import long_turns
from affect_memory.bench.common import (
    add_json_option,
    load_average,
    machine,
    memory_records,
    print_report,
    sentences,
)
from affect_memory.formatting import format_table
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.chroma.writes import EMBED_AHEAD_ENV, WRITE_CHUNK, by_user, chunks
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import check_embeddings
from affect_memory.models.onnx_embedder import OnnxEmbedder, bundled_model_dir, read_model_spec

__all__ = ["RUNS", "IngestPlan", "Run", "measure", "register"]


@dataclass(frozen=True)
class IngestPlan:
    """How many short and long texts, over how many users, how many rounds."""

    short: int = 2048
    long: int = 1024
    users: int = 4
    rounds: int = 1
    seed: int = 0


FULL_PLAN = IngestPlan()
QUICK_PLAN = IngestPlan(short=48, long=12, users=2)


@dataclass(frozen=True)
class Run:
    """One row: the bare embedder or an ingest, its thread count and whether it embeds ahead."""

    name: str
    ingest: bool
    every_core: bool
    embed_ahead: bool


RUNS = (
    Run("bare embedder", ingest=False, every_core=True, embed_ahead=False),
    Run("bare embedder", ingest=False, every_core=False, embed_ahead=False),
    Run("ingest, defaults", ingest=True, every_core=True, embed_ahead=True),
    Run("ingest, no embedding ahead", ingest=True, every_core=True, embed_ahead=False),
    Run("ingest, old default", ingest=True, every_core=False, embed_ahead=False),
)
"""The rows of each kind of text, in the order they run."""

_OLD_DEFAULT = RUNS[-1]


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench ingest``."""
    parser = benchmarks.add_parser(
        "ingest",
        help="texts/s through ChromaMemory.add beside the bare embedder's, short and long texts",
        description=(
            "Embed the same short sentences and long chat turns with the bare embedder (every "
            "core, one thread) and ingest them with one ChromaMemory.add into fresh stores "
            "(today's defaults; every core without embedding ahead; the old default, one "
            "thread), and report texts/s side by side with the ratios."
        ),
    )
    add_json_option(parser)
    parser.add_argument(
        "--quick", action="store_true", help="48 short and 12 long texts (for CI)"
    )
    parser.add_argument("--short", type=int, default=None, help="short texts (default 2048)")
    parser.add_argument("--long", type=int, default=None, help="long texts (default 1024)")
    parser.add_argument("--users", type=int, default=None, help="users they belong to (4)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="round-robin rounds; each row keeps its best (1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the texts")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print a table (or JSON with ``--json``)."""
    base = QUICK_PLAN if args.quick else FULL_PLAN
    plan = IngestPlan(
        short=base.short if args.short is None else args.short,
        long=base.long if args.long is None else args.long,
        users=base.users if args.users is None else args.users,
        rounds=args.rounds,
        seed=args.seed,
    )
    for name, least in (("short", 0), ("long", 0), ("users", 1), ("rounds", 1)):
        value = getattr(plan, name)
        if value < least:
            raise InvalidInputError(f"--{name} must be at least {least}, got {value!r}")
    if not plan.short and not plan.long:
        raise InvalidInputError("--short and --long are both 0: nothing to ingest")
    report = measure(plan, progress=not args.quick)
    return print_report(report, as_json=args.json, text=format_report)


def measure(plan: IngestPlan, *, progress: bool = False) -> dict[str, Any]:
    """Every run of ``RUNS`` on the short and the long texts; the report is JSON-ready."""
    from tqdm import tqdm

    load_before = load_average()
    batch = OnnxEmbedder()  # the defaults: every core for a batch unless the environment says
    one = OnnxEmbedder(threads=1, batch_threads=1)
    cores = batch.threads_for(WRITE_CHUNK)
    corpora = {
        "short": sentences(plan.short, seed=plan.seed),
        "long": long_turns(plan.long, seed=plan.seed),
    }
    kinds = [kind for kind, texts in corpora.items() if texts]
    for embedder in (batch, one):  # load the sessions of both thread counts before timing
        check_embeddings(embedder.embed_documents(corpora[kinds[0]][:8]), 8)
    best: dict[tuple[str, Run], float] = {}
    steps = plan.rounds * len(kinds) * len(RUNS)
    with (
        tempfile.TemporaryDirectory(prefix="affect-memory-ingest-") as scratch,
        tqdm(total=steps, unit="run", file=sys.stderr, leave=False, disable=not progress) as bar,
    ):
        for round_number in range(plan.rounds):
            for kind in kinds:
                records = memory_records(
                    corpora[kind], users=plan.users, seed=plan.seed, prefix=kind[0]
                )
                for number, setup in enumerate(RUNS):
                    bar.set_description(f"{kind}: {setup.name}")
                    embedder = batch if setup.every_core else one
                    where = Path(scratch) / f"{kind}-{round_number}-{number}"
                    seconds = _timed(setup, embedder, records, where)
                    rate = len(records) / seconds
                    best[(kind, setup)] = max(best.get((kind, setup), 0.0), rate)
                    bar.update(1)
    rows = [_row(kind, setup, best, cores, len(corpora[kind])) for kind in kinds for setup in RUNS]
    return {
        "benchmark": "ingest",
        "model": batch.name,
        "texts": {kind: len(corpora[kind]) for kind in kinds},
        "word_pieces": {kind: _pieces(corpora[kind]) for kind in kinds},
        "users": plan.users,
        "rounds": plan.rounds,
        "every_core_threads": cores,
        "rows": rows,
        "notes": [
            "bare embedder: OnnxEmbedder.embed_documents alone, each user's texts in chunks of "
            f"{WRITE_CHUNK} (the calls an add makes)",
            "ingest: one ChromaMemory.add of every text into a fresh embedded store, end to end "
            "(validation, id lookup, embedding, the index's journal, the Chroma writes)",
            "× bare: texts/s over the bare embedder's on the same thread count; × old default: "
            "over the ingest with one thread and no embedding ahead (the default before)",
            "pieces: the word pieces per text the model keeps (it cuts at 256)",
            f"each row is the best of {plan.rounds} round-robin round(s)",
        ],
        "machine": machine(load_before),
    }


def _timed(setup: Run, embedder: OnnxEmbedder, records: list[dict[str, Any]], where: Path) -> float:
    """Seconds ``setup`` takes over ``records``: embedding alone, or one ``add`` end to end."""
    if not setup.ingest:
        calls = [
            [record.text for record in part]
            for group in by_user([MemoryRecord.model_validate(r) for r in records]).values()
            for part in chunks(group, WRITE_CHUNK)
        ]
        start = time.perf_counter()
        for texts in calls:
            check_embeddings(embedder.embed_documents(texts), len(texts))
        return time.perf_counter() - start
    with _embed_ahead(setup.embed_ahead):
        memory = ChromaMemory(where, embedder=embedder, progress=False)
    try:
        start = time.perf_counter()
        written = memory.add(records, progress=False).written
        seconds = time.perf_counter() - start
        if written != len(records) or memory.count() != len(records):
            raise RuntimeError(f"ingest wrote {written} of {len(records)} texts")
    finally:
        memory.close()
    return seconds


@contextmanager
def _embed_ahead(on: bool) -> Iterator[None]:
    """``$AFFECT_MEMORY_EMBED_AHEAD`` set to ``on`` while a store is opened, then put back."""
    before = os.environ.get(EMBED_AHEAD_ENV)
    os.environ[EMBED_AHEAD_ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[EMBED_AHEAD_ENV]
        else:
            os.environ[EMBED_AHEAD_ENV] = before


def _row(
    kind: str, setup: Run, best: dict[tuple[str, Run], float], cores: int, count: int
) -> dict[str, Any]:
    """One report row: the rate, and its ratios to the bare embedder and the old default.

    The ratios are of the rates as reported, so a reader dividing the JSON's rates gets them.
    """
    bare = next(r for r in RUNS if not r.ingest and r.every_core == setup.every_core)
    rate, bare_rate, old_rate = (
        _reported(best[(kind, run)]) for run in (setup, bare, _OLD_DEFAULT)
    )
    return {
        "texts": kind,
        "count": count,
        "run": setup.name,
        "threads": cores if setup.every_core else 1,
        "embed_ahead": setup.embed_ahead,
        "texts_per_s": rate,
        "vs_bare": round(rate / bare_rate, 3),
        "vs_old_default": round(rate / old_rate, 3),
    }


def _reported(rate: float) -> float:
    """A rate in texts per second as the report gives it: to the hundredth."""
    return round(rate, 2)


def _pieces(texts: Sequence[str]) -> dict[str, float]:
    """Word pieces per text: the mean the model keeps (it cuts at 256), and the mean, least
    and most before the cut."""
    from tokenizers import Tokenizer

    directory = bundled_model_dir()
    keeps = read_model_spec(directory).max_tokens
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    counts = [len(encoding.ids) for encoding in tokenizer.encode_batch(list(texts))]
    return {
        "kept": round(statistics.mean(min(count, keeps) for count in counts), 1),
        "mean": round(statistics.mean(counts), 1),
        "min": min(counts),
        "max": max(counts),
    }


def format_report(report: dict[str, Any]) -> str:
    """One row per kind of text and run, then the notes and the machine."""
    rows = [
        [
            f"{r['texts']} ({report['word_pieces'][r['texts']]['kept']:g} pieces)",
            r["run"],
            r["threads"],
            "yes" if r["embed_ahead"] else "no",
            f"{r['texts_per_s']:,.1f}",
            f"{r['vs_bare']:.2f}×",
            f"{r['vs_old_default']:.2f}×",
        ]
        for r in report["rows"]
    ]
    table = format_table(
        ["texts", "run", "threads", "ahead", "texts/s", "× bare", "× old default"], rows
    )
    m = report["machine"]
    lines = [table, *(f"- {note}" for note in report["notes"])]
    lines.append(
        f"model {report['model']}; "
        f"{' and '.join(f'{n:,} {kind}' for kind, n in report['texts'].items())} texts over "
        f"{report['users']} users; "
        f"chromadb {m['chromadb']}, {m['cpus']} CPUs, load average "
        f"{m['load_average_1m_before']} before, {m['load_average_1m_after']} after"
    )
    return "\n".join(lines)
