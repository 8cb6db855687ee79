"""``affect-memory bench recall``: per-query time of recall by stage, and HNSW recall@k.

Each query is ``ChromaMemory.recall`` with ``DENSE_RECALL`` over the candidate pool (64 by
default), exactly what a dense recall runs, on the per-user collections it created with its
HNSW settings (the "user" rows); queries are embedded before timing (a table lookup serves
them). The memory's observer reports the stages: the Chroma query ("chroma"), the index's and
Chroma's reads of the rows ranking needs ("convert"), and the rest ("rerank": mapping, the
pruned fetch, the kernel's ranking and the explained hits); the embed stage runs the real model
on one sentence per query. recall@k reads the pool's ids (``ChromaMemory.candidates``, not
timed). The "shared" rows are the old layout on the same memories: one shared collection of
every user (in a store of its own), queried ``where user_id``, mapped and ranked by the kernel
(``rank_columns``), embedding excluded. The "none" rows query that collection without a
filter, and ``filter_only_ms`` times its ``where user_id`` alone.

* random corpus: unit vectors inserted through ``ChromaMemory.add`` (records like real ones,
  10 users, so the user filter matches ~10%), queried with random unit vectors;
* real corpus (``--real N``): N templated sentences embedded by the bundled model (cached as
  ``.npy`` beside the store), queried with held-out sentences -- the HNSW recall check.

recall@k compares Chroma's k ids with an exact numpy cosine search over the same vectors and
the same user's rows (or all rows, unfiltered).

Corpora and exact search are ``affect_memory.bench.recall_corpus``'s, targets and the text report
``affect_memory.bench.recall_report``'s. The module is about 700 lines because what is left is
one measurement: the per-user, shared, over-fetch and partition layouts are timed query by
query in one loop each, over the same built collections, and read best side by side.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
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
from affect_memory.bench.recall_corpus import (
    WARMUP_QUERIES,
    Corpus,
    Exact,
    hnsw_tag,
    progress_bar,
    random_corpus,
    real_corpus,
    recall_fraction,
)
from affect_memory.bench.recall_hybrid import measure_hybrid
from affect_memory.bench.recall_report import (
    CONVERSION_SHARE_TARGET,
    P95_TARGET_MS,
    RECALL_TARGET,
    format_report,
    targets,
)
from affect_memory.kernel.batch import rank_columns
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.chroma.collections import DEFAULT_HNSW, HnswParams
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.chroma.rows import rows_of
from affect_memory.memory.results import MAX_TOP_K
from affect_memory.memory.settings import DENSE_RECALL, RecallSettings, resolve_settings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder, check_embeddings, default_embedder

__all__ = [
    "RecallPlan",
    "measure",
    "register",
]

FILTER_PROBES = 30
OVERFETCH_QUERIES = 50
"""Queries per over-fetch size (each returns hundreds of rows with metadata: slow)."""
EMBED_PROBES = 40
"""Random-vector queries whose sentence is also embedded (the embed stage does not depend on
the collection); real-corpus queries are all embedded, since the embedding is the query."""
"""Queries that also time the metadata filter alone (``get(where=user)``), a diagnostic."""


@dataclass(frozen=True)
class RecallPlan:
    """What to measure: sizes of the random sweep, queries per size, and the real-corpus run."""

    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    queries: int = 200
    real: int = 0
    users: int = 10
    candidates: int = MAX_TOP_K  # the engine's 64-candidate pool
    top_k: int = 6
    hnsw: HnswParams = DEFAULT_HNSW
    overfetch: tuple[int, ...] = ()
    partition: bool = False
    seed: int = 0
    keep: Path | None = None
    notes: list[str] = field(default_factory=list)
    hybrid: int = 10_000
    """Memories of one user in the hybrid-vs-dense comparison (0: skip it)."""


FULL_PLAN = RecallPlan()
QUICK_PLAN = RecallPlan(sizes=(1_000,), queries=12, hybrid=1_000)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--sizes takes integers like 1000,10000, got {text!r}"
        ) from None
    if not sizes or any(size < 100 for size in sizes):
        raise argparse.ArgumentTypeError(f"every size must be at least 100, got {text!r}")
    return sizes


def _hnsw(text: str) -> HnswParams:
    try:
        construction, search, neighbors = (int(part) for part in text.split(","))
        return HnswParams(ef_construction=construction, ef_search=search, max_neighbors=neighbors)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(
            f"--hnsw takes EF_CONSTRUCTION,EF_SEARCH,MAX_NEIGHBORS (e.g. 100,100,16), got {text!r}"
        ) from None


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench recall``."""
    parser = benchmarks.add_parser(
        "recall",
        help="recall time by stage (embed, Chroma, row reads, rerank) and HNSW recall@64",
        description=(
            "Time the dense recall per query (ChromaMemory.recall with DENSE_RECALL over 64 "
            "candidates), split into embedding (the real model), the Chroma query, the row "
            "reads ('convert') and the rest: mapping, kernel ranking, hits ('rerank'); "
            "medians and p95, at 1,000, "
            "10,000 and 100,000 random unit vectors through the per-user collections (the "
            "'user' rows), beside the old layout's one shared collection queried where "
            "user_id (the 'shared' rows) and without a filter (the 'none' rows), plus "
            "recall@64 against exact search. --real N adds N real-embedding "
            f"memories. Targets: conversion + rerank <= {CONVERSION_SHARE_TARGET:.0%} of "
            f"recall at 10,000; p95 <= {P95_TARGET_MS:g} ms at 100,000 per user, embedding "
            f"excluded; recall@64 >= {RECALL_TARGET} on real embeddings."
        ),
    )
    add_json_option(parser)
    parser.add_argument("--quick", action="store_true", help="1,000 memories, few queries (CI)")
    parser.add_argument(
        "--sizes", type=_sizes, default=None, help="random-vector sizes (default 1000,10000,100000)"
    )
    parser.add_argument("--queries", type=int, default=None, help="queries per size (default 200)")
    parser.add_argument(
        "--real",
        type=int,
        default=0,
        metavar="N",
        help="also measure N real-embedding memories (the HNSW recall check; 20000 in the docs)",
    )
    parser.add_argument(
        "--hnsw",
        type=_hnsw,
        default=None,
        metavar="C,S,M",
        help="ef_construction,ef_search,max_neighbors of new collections (default: the plugin's)",
    )
    parser.add_argument(
        "--overfetch",
        type=_sizes,
        default=(),
        metavar="N,...",
        help="also try unfiltered queries of N rows filtered afterwards, at the largest size",
    )
    parser.add_argument(
        "--partition",
        action="store_true",
        help="also try one collection per user (no filter needed) at the largest size",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="build (or reuse) the collections and the embedding cache in DIR",
    )
    parser.add_argument(
        "--hybrid",
        type=int,
        default=None,
        metavar="N",
        help="memories of one user timing the hybrid recall beside the dense one (default "
        "10000; 0 skips)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of vectors and corpus")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print tables (or JSON with ``--json``)."""
    base = QUICK_PLAN if args.quick else FULL_PLAN
    queries = base.queries if args.queries is None else args.queries
    if isinstance(queries, bool) or queries < 1:
        raise InvalidInputError(f"--queries must be a positive integer, got {queries!r}")
    if args.real < 0 or 0 < args.real < 1_000:
        raise InvalidInputError(f"--real must be 0 or at least 1000 memories, got {args.real}")
    plan = replace(
        base,
        sizes=args.sizes or base.sizes,
        queries=queries,
        real=args.real,
        hnsw=args.hnsw or DEFAULT_HNSW,
        overfetch=args.overfetch,
        partition=args.partition,
        seed=args.seed,
        keep=args.keep,
        notes=[],
        hybrid=base.hybrid if args.hybrid is None else args.hybrid,
    )
    if plan.hybrid < 0 or 0 < plan.hybrid < 100:
        raise InvalidInputError(f"--hybrid must be 0 or at least 100 memories, got {plan.hybrid}")
    report = measure(plan, progress=not args.quick)
    return print_report(report, as_json=args.json, text=format_report)


# ---------------------------------------------------------------- timing hooks


class _StageTimer:
    """A ``ChromaMemory`` observer adding up each stage's nanoseconds until cleared."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = {}

    def __call__(self, stage: str, seconds: float) -> None:
        """Add a stage's duration."""
        self.ns[stage] = self.ns.get(stage, 0) + round(seconds * 1e9)

    def split(self) -> tuple[int, int]:
        """The Chroma query's nanoseconds and the row reads' (the index's and Chroma's) since
        the last ``split``, which starts the next count."""
        stages, self.ns = self.ns, {}
        return stages.get("chroma_query", 0), stages.get("index_read", 0) + stages.get(
            "chroma_get", 0
        )


def _dense(plan: RecallPlan) -> RecallSettings:
    """``DENSE_RECALL`` over the plan's candidate pool."""
    return resolve_settings(DENSE_RECALL, candidates=plan.candidates)


class _TimedCollection:
    """A Chroma collection whose ``query`` records its own duration; everything else passes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.last_ns = 0

    def query(self, **kwargs: Any) -> Any:
        """Chroma's query, timed."""
        start = time.perf_counter_ns()
        result = self._inner.query(**kwargs)
        self.last_ns = time.perf_counter_ns() - start
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _client_beside(memory: ChromaMemory) -> Any:
    """A Chroma client of the memory's own store (this process shares its lock)."""
    client, lock = open_client(parse_location(memory.location))
    if lock is not None:
        lock.release()  # the memory's own hold keeps the store locked
    return client


# ---------------------------------------------------------------- one collection


def _open(
    root: Path,
    corpus: Corpus,
    plan: RecallPlan,
    progress: bool,
    name: str | None = None,
    store: str | None = None,
    observer: _StageTimer | None = None,
    asked: np.ndarray | None = None,
) -> tuple[ChromaMemory, float | None]:
    """Open the corpus's collection, building it through ``ChromaMemory.add``; its embedder
    serves the memories' vectors and the queries' (``asked``, by default the corpus's own).

    Each collection gets a store directory of its own (``root/store``, by default named after
    the collection): Chroma evaluates a ``where`` filter in one SQLite file per store, whose
    cost grows with every memory in it, so a shared store would make small sizes look slow.
    """
    n = len(corpus.texts)
    name = name or f"{corpus.kind}-{n}-{hnsw_tag(plan.hnsw)}-seed{plan.seed}"
    queries = corpus.query_vectors if asked is None else asked
    assert queries is not None, "the real corpus's queries are embedded before opening"
    table = TableEmbedder(
        [*corpus.texts, *corpus.query_texts],
        np.concatenate([corpus.vectors, queries]),
        name=corpus.embedder_name,
    )
    memory = ChromaMemory(
        root / (store or name),
        collection=name,
        embedder=table,
        hnsw=plan.hnsw,
        progress=progress,
        observer=observer,
    )
    stored = memory.count()
    if stored == n:
        return memory, None
    if stored:
        memory.close()
        raise InvalidInputError(
            f"collection {name!r} in {root} holds {stored} memories, not {n}: delete the "
            "directory given to --keep, or pass another"
        )
    start = time.perf_counter()
    memory.add(corpus.records(), progress=progress)
    return memory, time.perf_counter() - start


@contextmanager
def _shared(memory: ChromaMemory, corpus: Corpus, plan: RecallPlan) -> Iterator[Any]:
    """The corpus in one collection of every user (the old layout), built (or reused if whole)
    in a store of its own beside the per-user one, as ``_open`` gives every store: in the
    per-user store its 100,000 rows would slow that store's SQLite reads, which no real
    per-user store pays."""
    from chromadb.errors import NotFoundError

    from affect_memory.memory.records import MemoryRecord

    own = Path(memory.location)
    client, lock = open_client(parse_location(str(own.with_name(f"{own.name}-shared"))))
    try:
        name = f"{memory.collection_name}-shared"
        try:
            shared = client.get_collection(name, embedding_function=None)
        except NotFoundError:
            configuration = {"hnsw": {"space": "cosine", **plan.hnsw.model_dump()}}
            shared = client.create_collection(
                name, configuration=configuration, embedding_function=None
            )
        n = len(corpus.texts)
        if shared.count() != n:
            records = [MemoryRecord.model_validate(r) for r in corpus.records()]
            for start in range(0, n, 2048):
                part = records[start : start + 2048]
                shared.upsert(
                    ids=[r.id for r in part],
                    embeddings=corpus.vectors[start : start + len(part)],
                    documents=[r.text for r in part],
                    metadatas=[r.to_metadata() for r in part],
                )
        yield shared
    finally:
        client.close()
        if lock is not None:
            lock.release()


def _measure(
    memory: ChromaMemory,
    timer: _StageTimer,
    corpus: Corpus,
    model: Embedder,
    plan: RecallPlan,
    step: Callable[[int], None],
    old_layout: Any,
) -> list[dict[str, Any]]:
    """Per-user and unfiltered shared-collection rows, queries interleaved."""
    shared = _TimedCollection(old_layout)
    exact = Exact(corpus)
    k = plan.candidates
    dense = _dense(plan)
    stages: dict[str, list[int]] = {
        "embed": [], "query": [], "conversion": [], "rerank": [], "unfiltered_query": [],
        "shared_query": [], "shared_path": [],
    }  # fmt: skip
    recall_shared: list[float] = []
    totals: list[int] = []
    excluding: list[int] = []
    filter_only: list[int] = []
    matches: list[int] = []
    recall_filtered: list[float] = []
    recall_unfiltered: list[float] = []
    for index, text in enumerate(corpus.query_texts):
        user = f"user-{index % plan.users:02d}"
        embed_ns = None
        if corpus.query_vectors is None or index < WARMUP_QUERIES + EMBED_PROBES:
            start = time.perf_counter_ns()
            embedded = check_embeddings(model.embed_documents([text]), 1)
            embed_ns = time.perf_counter_ns() - start
        vector = embedded if corpus.query_vectors is None else corpus.query_vectors[[index]]
        mood = 0.5 - index % 2
        timer.split()
        start = time.perf_counter_ns()
        memory.recall(
            text, user, mood_valence=mood, now=BENCH_NOW, top_k=plan.top_k, settings=dense
        )
        path_ns = time.perf_counter_ns() - start
        chroma_ns, read_ns = timer.split()
        pool = [c.id for c in memory.candidates(text, user, now=BENCH_NOW, settings=dense)]
        unfiltered = shared.query(
            query_embeddings=vector,
            n_results=k,
            include=["documents", "metadatas", "distances"],
        )
        unfiltered_ns = shared.last_ns
        # The old layout: the shared collection, `where user_id`, mapped and ranked.
        start = time.perf_counter_ns()
        old = shared.query(
            query_embeddings=vector,
            n_results=k,
            where={"user_id": user},
            include=["documents", "metadatas", "distances"],
        )
        old_rows = rows_of(old, user)[0]
        rank_columns(old_rows.columns, BENCH_NOW, mood_valence=mood, limit=plan.top_k)
        shared_path_ns = time.perf_counter_ns() - start
        shared_query_ns = shared.last_ns
        step(1)
        if index < WARMUP_QUERIES:
            continue
        if index < WARMUP_QUERIES + FILTER_PROBES:
            start = time.perf_counter_ns()
            matched = shared.get(where={"user_id": user}, include=[])
            filter_only.append(time.perf_counter_ns() - start)
            matches.append(len(matched["ids"]))
        stages["query"].append(chroma_ns)
        stages["conversion"].append(read_ns)
        stages["rerank"].append(path_ns - chroma_ns - read_ns)
        stages["unfiltered_query"].append(unfiltered_ns)
        stages["shared_query"].append(shared_query_ns)
        stages["shared_path"].append(shared_path_ns)
        recall_shared.append(recall_fraction(old_rows.ids, exact.top(vector[0], k, user)))
        excluding.append(path_ns)
        if embed_ns is not None:
            stages["embed"].append(embed_ns)
            totals.append(embed_ns + path_ns)
        recall_filtered.append(recall_fraction(pool, exact.top(vector[0], k, user)))
        everyone = exact.top(vector[0], k, None)
        recall_unfiltered.append(recall_fraction(unfiltered["ids"][0], everyone))
    filtered = {
        "corpus": corpus.kind,
        "n": len(corpus.texts),
        "filter": "user",
        "embed_ms": summary_ms(stages["embed"]),
        "query_ms": summary_ms(stages["query"]),
        "conversion_ms": summary_ms(stages["conversion"]),
        "rerank_ms": summary_ms(stages["rerank"]),
        "total_ms": summary_ms(totals),
        "embedded_queries": len(totals),
        "total_excluding_embed_ms": summary_ms(excluding),
        "recall_at_k": round(float(np.mean(recall_filtered)), 4),
        "recall_at_k_min": round(float(np.min(recall_filtered)), 4),
        "filter_only_ms": summary_ms(filter_only),
        "filter_matches": round(float(np.mean(matches)), 1),
    }
    unfiltered_row = {
        "corpus": corpus.kind,
        "n": len(corpus.texts),
        "filter": "none",
        "query_ms": summary_ms(stages["unfiltered_query"]),
        "recall_at_k": round(float(np.mean(recall_unfiltered)), 4),
        "recall_at_k_min": round(float(np.min(recall_unfiltered)), 4),
    }
    shared_row = {
        "corpus": corpus.kind,
        "n": len(corpus.texts),
        "filter": "shared",
        "query_ms": summary_ms(stages["shared_query"]),
        "total_excluding_embed_ms": summary_ms(stages["shared_path"]),
        "recall_at_k": round(float(np.mean(recall_shared)), 4),
        "recall_at_k_min": round(float(np.min(recall_shared)), 4),
    }
    return [filtered, shared_row, unfiltered_row]


def _overfetch(shared: Any, corpus: Corpus, plan: RecallPlan, fetch: int) -> dict[str, Any]:
    """Unfiltered query of ``fetch`` rows, then keep the user's first k: time and recall."""
    exact = Exact(corpus)
    assert corpus.query_vectors is not None
    times: list[int] = []
    recalls: list[float] = []
    short = 0
    for index in range(min(len(corpus.query_texts), WARMUP_QUERIES + OVERFETCH_QUERIES)):
        user = f"user-{index % plan.users:02d}"
        vector = corpus.query_vectors[[index]]
        start = time.perf_counter_ns()
        result = shared.query(
            query_embeddings=vector, n_results=fetch, include=["metadatas", "distances"]
        )
        kept = [
            ident
            for ident, meta in zip(result["ids"][0], result["metadatas"][0], strict=True)
            if meta["user_id"] == user
        ][: plan.candidates]
        elapsed = time.perf_counter_ns() - start
        if index < WARMUP_QUERIES:
            continue
        short += len(kept) < plan.candidates
        times.append(elapsed)
        recalls.append(recall_fraction(kept, exact.top(vector[0], plan.candidates, user)))
    return {
        "n": len(corpus.texts),
        "fetch": fetch,
        "query_ms": summary_ms(times),
        "recall_at_k": round(float(np.mean(recalls)), 4),
        "queries_short_of_k": short,
    }


def _picker(records: list[dict[str, Any]], rows: np.ndarray) -> Callable[[], list[dict[str, Any]]]:
    """A records factory for the rows of one partition."""
    return lambda: [records[i] for i in rows.tolist()]


def _partitioned(root: Path, corpus: Corpus, plan: RecallPlan, progress: bool) -> dict[str, Any]:
    """One collection per user (the same vectors): the query path's filter then matches all."""
    records = corpus.records()
    memories: dict[str, ChromaMemory] = {}
    built = 0.0
    try:
        for user in sorted(set(corpus.owners.tolist())):
            rows = np.flatnonzero(corpus.owners == user)
            part = replace(
                corpus,
                texts=[corpus.texts[i] for i in rows],
                ids=corpus.ids[rows],
                owners=corpus.owners[rows],
                vectors=corpus.vectors[rows],
                records=_picker(records, rows),
            )
            name = f"part-{len(corpus.texts)}-{hnsw_tag(plan.hnsw)}-seed{plan.seed}-{user}"
            store = f"part-{len(corpus.texts)}-{hnsw_tag(plan.hnsw)}-seed{plan.seed}"
            memories[user], seconds = _open(root, part, plan, progress, name=name, store=store)
            built += seconds or 0.0
        exact = Exact(corpus)
        assert corpus.query_vectors is not None
        k = plan.candidates
        dense = _dense(plan)
        owned = {
            user: _client_beside(memory).get_collection(
                memory.collection_for(user), embedding_function=None
            )
            for user, memory in memories.items()
        }
        path_ns: list[int] = []
        plain_ns: list[int] = []
        recalls: list[float] = []
        plain_recalls: list[float] = []
        for index in range(len(corpus.query_texts)):
            user = f"user-{index % plan.users:02d}"
            memory = memories[user]
            vector = corpus.query_vectors[[index]]
            text = corpus.query_texts[index]
            start = time.perf_counter_ns()
            memory.recall(text, user, now=BENCH_NOW, top_k=plan.top_k, settings=dense)
            elapsed = time.perf_counter_ns() - start
            found = [c.id for c in memory.candidates(text, user, now=BENCH_NOW, settings=dense)]
            own = owned[user]
            start = time.perf_counter_ns()
            plain = own.query(
                query_embeddings=vector,
                n_results=k,
                include=["documents", "metadatas", "distances"],
            )
            plain_elapsed = time.perf_counter_ns() - start
            if index < WARMUP_QUERIES:
                continue
            wanted = exact.top(vector[0], k, user)
            path_ns.append(elapsed)
            plain_ns.append(plain_elapsed)
            recalls.append(recall_fraction(found, wanted))
            plain_recalls.append(recall_fraction(plain["ids"][0], wanted))
    finally:
        for memory in memories.values():
            memory.close()
    return {
        "n": len(corpus.texts),
        "collections": len(memories),
        "build_seconds": round(built, 2) if built else None,
        "query_path_ms": summary_ms(path_ns),
        "unfiltered_query_ms": summary_ms(plain_ns),
        "recall_at_k": round(float(np.mean(recalls)), 4),
        "unfiltered_recall_at_k": round(float(np.mean(plain_recalls)), 4),
    }


# ---------------------------------------------------------------- the run


def measure(plan: RecallPlan, *, progress: bool = False) -> dict[str, Any]:
    """Build (or reuse) every collection, run the queries and return the JSON-ready report."""
    load_before = load_average()
    model = default_embedder()
    check_embeddings(model.embed_documents(["warm the model up"]), 1)
    rows: list[dict[str, Any]] = []
    builds: list[dict[str, Any]] = []
    overfetch: list[dict[str, Any]] = []
    partition: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="affect-memory-recall-") as scratch:
        root = plan.keep if plan.keep is not None else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        jobs: list[tuple[str, int]] = [("random", n) for n in plan.sizes]
        if plan.real:
            jobs.append(("real", plan.real))
        for kind, n in jobs:
            corpus: Corpus
            embed_seconds = None
            asked = None
            if kind == "random":
                corpus = random_corpus(n, queries=plan.queries, users=plan.users, seed=plan.seed)
            else:
                corpus, embed_seconds = real_corpus(
                    n,
                    queries=plan.queries,
                    users=plan.users,
                    seed=plan.seed,
                    model=model,
                    root=root,
                    progress=progress,
                )
                # each query embedded alone, as the embed stage times it, before the timing
                asked = np.concatenate(
                    [check_embeddings(model.embed_documents([t]), 1) for t in corpus.query_texts]
                )
            timer = _StageTimer()
            memory, build_seconds = _open(root, corpus, plan, progress, observer=timer, asked=asked)
            try:
                builds.append(
                    {
                        "corpus": kind,
                        "n": n,
                        "build_seconds": None if build_seconds is None else round(build_seconds, 2),
                        "inserts_per_second": None
                        if build_seconds is None
                        else round(n / build_seconds, 1),
                        "embed_seconds": None if embed_seconds is None else round(embed_seconds, 2),
                        "reused": build_seconds is None,
                    }
                )
                queries = len(corpus.query_texts)
                with (
                    _shared(memory, corpus, plan) as old,
                    progress_bar(queries, progress, f"{kind} n={n:,} queries", "query") as step,
                ):
                    rows.extend(_measure(memory, timer, corpus, model, plan, step, old))
                    if kind == "random" and n == max(plan.sizes):
                        overfetch.extend(_overfetch(old, corpus, plan, f) for f in plan.overfetch)
            finally:
                memory.close()
            if kind == "random" and n == max(plan.sizes) and plan.partition:
                partition = _partitioned(root, corpus, plan, progress)
        hybrid = None
        if plan.hybrid:
            hybrid = measure_hybrid(
                root, plan.hybrid, queries=plan.queries, seed=plan.seed, model=model,
                progress=progress,
            )  # fmt: skip
    return {
        "benchmark": "recall",
        "candidates": plan.candidates,
        "top_k": plan.top_k,
        "users": plan.users,
        "queries": plan.queries,
        "hnsw": plan.hnsw.model_dump(),
        "rows": rows,
        "overfetch": overfetch,
        "partition": partition,
        "builds": builds,
        "hybrid": hybrid,
        "targets": targets(rows),
        "machine": machine(load_before),
    }
