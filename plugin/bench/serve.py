"""``affect-memory bench serve``: recalls per second and p95 over HTTP beside ``memory.recall``.

One run builds a store of N real-embedding memories over 10 users (the bench's templated
sentences, embedded once and cached as ``.npy`` in the cache directory, then written through
``ChromaMemory.add`` from the cache), and asks the same held-out queries of it twice with the
same number of concurrent clients: first in process, C threads calling ``ChromaMemory.recall``
on one memory (what ``affect-memory serve`` does with its worker threads), then over HTTP,
C threads each with its own keep-alive ``httpx`` client posting to ``/v1/users/{id}/recall``
of an ``affect-memory serve`` started on a free loopback port and stopped by PID. The sides
run one after the other because an embedded store serves one process at a time. Both embed
each query with the real model, so the ratio is what HTTP adds: the request, the JSON both
ways and the server's scheduling. Every answer is kept, and the report says whether both
sides ranked each query the same (ids, and scores within ``RECALL_MANY_TOLERANCE``).
"""

from __future__ import annotations

import argparse
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.bench.common import (
    BENCH_NOW,
    TableEmbedder,
    add_json_option,
    load_average,
    machine,
    print_report,
    summary_ms,
)
from affect_memory.bench.recall_corpus import WARMUP_QUERIES, real_corpus
from affect_memory.bench.servers import api_server
from affect_memory.errors import StoreUnavailableError
from affect_memory.kernel.errors import AffectMemoryError, InvalidInputError
from affect_memory.memory.results import RECALL_MANY_TOLERANCE
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.cache import cache_dir
from affect_memory.models.embeddings import default_embedder

__all__ = [
    "RATIO_TARGET",
    "Answer",
    "ServeMeasurement",
    "ServePlan",
    "format_report",
    "measure",
    "register",
    "run",
    "same_answer",
]

RATIO_TARGET = 2.0
"""The issue's aim: HTTP p95 within this many times the in-process p95."""

REQUEST_TIMEOUT = 120.0
"""Seconds one HTTP recall may take before the benchmark gives up."""

Answer = tuple[tuple[str, float], ...]
"""One query's hits in rank order: each memory id with its score."""


@dataclass(frozen=True)
class ServePlan:
    """What to measure: memories, users, concurrent clients, measured queries, hits each."""

    memories: int = 10_000
    clients: int = 4
    queries: int = 200
    users: int = 10
    top_k: int = 6
    seed: int = 0
    cache: Path | None = None
    """Where the corpus's embeddings are cached (default: the cache directory's bench-serve)."""
    progress: bool = False


@dataclass(frozen=True)
class _Query:
    user_id: str
    text: str
    mood_valence: float


@dataclass(frozen=True)
class ServeMeasurement:
    """The JSON-ready report, and each measured query's answers on both sides (index order)."""

    report: dict[str, Any]
    in_process: list[Answer]
    http: list[Answer]


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench serve``."""
    parser = benchmarks.add_parser(
        "serve",
        help="recalls/s and p95 over HTTP (affect-memory serve) beside in-process recall",
        description=(
            "Build a store of N real-embedding memories over 10 users, then run the same "
            "queries with C concurrent clients twice: in process (C threads calling "
            "ChromaMemory.recall on one memory, as the server's own worker threads do, so the "
            "two sides differ only by HTTP) and over HTTP (C threads, each with a keep-alive "
            "httpx client, posting to an `affect-memory serve` on a free loopback port). Both "
            "embed each query with the real model. Reports recalls per second, median and "
            f"p95 per side and the ratio HTTP p95 / in-process p95 (aim: <= {RATIO_TARGET:g}x), "
            "and whether both sides ranked every query the same."
        ),
    )
    add_json_option(parser)
    parser.add_argument(
        "--memories", type=int, default=10_000, metavar="N", help="memories (default 10000)"
    )
    parser.add_argument(
        "--clients", type=int, default=4, metavar="C", help="concurrent clients (default 4)"
    )
    parser.add_argument(
        "--queries", type=int, default=200, metavar="Q", help="measured queries (default 200)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the corpus's embeddings are cached (default: the cache directory's "
        "bench-serve)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus")
    parser.set_defaults(handler=run)


def _check_plan(plan: ServePlan) -> None:
    for name, value, least in (
        ("--memories", plan.memories, 100),
        ("--clients", plan.clients, 1),
        ("--queries", plan.queries, 1),
    ):
        if isinstance(value, bool) or value < least:
            raise InvalidInputError(f"{name} must be an integer of at least {least}, got {value}")


def run(args: argparse.Namespace) -> int:
    """Measure, then print the table (or JSON with ``--json``)."""
    plan = ServePlan(
        memories=args.memories,
        clients=args.clients,
        queries=args.queries,
        seed=args.seed,
        cache=args.cache,
        progress=not args.json,
    )
    return print_report(measure(plan).report, as_json=args.json, text=format_report)


# ---------------------------------------------------------------- driving clients


def _drive(
    clients: int, queries: Sequence[_Query], ask: Callable[[int, _Query], Answer]
) -> tuple[list[int], list[Answer], float]:
    """Run every query once across ``clients`` threads (each takes the next one not yet
    taken); each query's nanoseconds and answer, and the seconds the whole took."""
    latencies = [0] * len(queries)
    answers: list[Answer] = [()] * len(queries)
    taken = iter(range(len(queries)))
    guard = threading.Lock()

    def client(number: int) -> None:
        while True:
            with guard:
                index = next(taken, None)
            if index is None:
                return
            start = time.perf_counter_ns()
            answers[index] = ask(number, queries[index])
            latencies[index] = time.perf_counter_ns() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(clients, thread_name_prefix="bench-serve client") as pool:
        for future in [pool.submit(client, number) for number in range(clients)]:
            future.result()
    return latencies, answers, time.perf_counter() - start


def _side(name: str, how: str, latencies: list[int], seconds: float) -> dict[str, Any]:
    return {
        "side": name,
        "how": how,
        "queries": len(latencies),
        "seconds": round(seconds, 3),
        "recalls_per_second": round(len(latencies) / seconds, 2),
        "latency_ms": summary_ms(latencies),
    }


def _in_process(
    memory: ChromaMemory, plan: ServePlan, warmup: list[_Query], measured: list[_Query]
) -> tuple[list[int], list[Answer], float]:
    def ask(number: int, query: _Query) -> Answer:
        result = memory.recall(
            query.text,
            query.user_id,
            mood_valence=query.mood_valence,
            now=BENCH_NOW,
            top_k=plan.top_k,
        )
        return tuple((hit.id, hit.score) for hit in result.results)

    _drive(plan.clients, warmup, ask)
    return _drive(plan.clients, measured, ask)


def _over_http(
    url: str, token: str, plan: ServePlan, warmup: list[_Query], measured: list[_Query]
) -> tuple[list[int], list[Answer], float, int]:
    """The measured queries over HTTP, and how many memories the server says it holds."""
    try:
        import httpx
    except ImportError:
        raise AffectMemoryError(
            "bench serve needs httpx to call the server: pip install httpx"
        ) from None

    headers = {"Authorization": f"Bearer {token}"}
    sessions = [
        httpx.Client(base_url=url, headers=headers, timeout=REQUEST_TIMEOUT)
        for _ in range(plan.clients)
    ]
    try:

        def ask(number: int, query: _Query) -> Answer:
            reply = sessions[number].post(
                f"/v1/users/{query.user_id}/recall",
                json={
                    "query": query.text,
                    "top_k": plan.top_k,
                    "now": BENCH_NOW.isoformat(),
                    "mood_valence": query.mood_valence,
                },
            )
            body = _json_of(reply, "POST /v1/users/{user_id}/recall")
            return tuple((str(hit["id"]), float(hit["score"])) for hit in body["results"])

        users = _json_of(sessions[0].get("/v1/users"), "GET /v1/users")["users"]
        served = sum(int(user["memories"]) for user in users)
        _drive(plan.clients, warmup, ask)
        return (*_drive(plan.clients, measured, ask), served)
    finally:
        for session in sessions:
            session.close()


def _json_of(reply: Any, what: str) -> Any:
    """The reply's JSON; a refusal stops the benchmark with the problem's status and detail."""
    if reply.status_code != 200:
        try:
            detail = reply.json().get("detail", "")
        except ValueError:
            detail = reply.text[:200]
        raise StoreUnavailableError(f"{what} answered {reply.status_code}: {detail}")
    return reply.json()


# ---------------------------------------------------------------- the run


def _agreement(left: list[Answer], right: list[Answer]) -> dict[str, Any]:
    """How many queries both sides ranked the same, and the largest score difference."""
    same = 0
    largest = 0.0
    for mine, theirs in zip(left, right, strict=True):
        same += same_answer(mine, theirs)
        for (_, score), (_, other) in zip(mine, theirs, strict=False):
            largest = max(largest, abs(score - other))
    return {
        "queries": len(left),
        "same_ranking": same,
        "max_score_difference": largest,
        "tolerance": RECALL_MANY_TOLERANCE,
    }


def same_answer(mine: Answer, theirs: Answer, tolerance: float = RECALL_MANY_TOLERANCE) -> bool:
    """Whether two answers hold the same memories with the same scores (within ``tolerance``),
    in the same order except between hits whose scores are that close."""
    if len(mine) != len(theirs) or {i for i, _ in mine} != {i for i, _ in theirs}:
        return False
    scores = dict(theirs)
    return all(abs(score - scores[ident]) <= tolerance for ident, score in mine) and all(
        abs(a - b) <= tolerance for (_, a), (_, b) in zip(mine, theirs, strict=True)
    )


def measure(plan: ServePlan) -> ServeMeasurement:
    """Build the store, run both sides and return the report with every answer."""
    _check_plan(plan)
    load_before = load_average()
    model = default_embedder()
    warmups = max(WARMUP_QUERIES, plan.users, plan.clients)  # every user's index loaded once
    cache = plan.cache if plan.cache is not None else cache_dir() / "bench-serve"
    cache.mkdir(parents=True, exist_ok=True)
    corpus, embed_seconds = real_corpus(
        plan.memories,
        queries=plan.queries + warmups - WARMUP_QUERIES,
        users=plan.users,
        seed=plan.seed,
        model=model,
        root=cache,
        progress=plan.progress,
    )
    asked = [
        _Query(f"user-{index % plan.users:02d}", text, 0.5 - index % 2)
        for index, text in enumerate(corpus.query_texts)
    ]
    warmup, measured = asked[:warmups], asked[warmups:]
    with tempfile.TemporaryDirectory(prefix="affect-memory-bench-serve-") as scratch:
        data_dir = Path(scratch) / "data"
        table = TableEmbedder(corpus.texts, corpus.vectors, name=model.name)
        start = time.perf_counter()
        with ChromaMemory(data_dir / "chroma", embedder=table, progress=plan.progress) as memory:
            memory.add(corpus.records(), progress=plan.progress)
        build_seconds = time.perf_counter() - start
        with ChromaMemory(data_dir / "chroma", embedder=model, create=False) as memory:
            local_ns, local_answers, local_seconds = _in_process(memory, plan, warmup, measured)
        token = secrets.token_urlsafe(24)
        with api_server(data_dir, token=token) as url:
            http_ns, http_answers, http_seconds, served = _over_http(
                url, token, plan, warmup, measured
            )
    if served != plan.memories:
        raise AffectMemoryError(f"the server holds {served} memories, not {plan.memories}")
    local = _side(
        "in-process", f"ChromaMemory.recall, {plan.clients} threads", local_ns, local_seconds
    )
    http = _side(
        "http", f"POST .../recall, {plan.clients} httpx clients", http_ns, http_seconds
    )
    ratio_p95 = http["latency_ms"]["p95"] / local["latency_ms"]["p95"]
    report: dict[str, Any] = {
        "benchmark": "serve",
        "memories": plan.memories,
        "users": plan.users,
        "clients": plan.clients,
        "queries": len(measured),
        "warmup_queries": len(warmup),
        "top_k": plan.top_k,
        "embedder": model.name,
        "build_seconds": round(build_seconds, 2),
        "embed_seconds": None if embed_seconds is None else round(embed_seconds, 2),
        "embedding_cache": str(cache),
        "sides": [local, http],
        "ratio_p95": round(ratio_p95, 3),
        "ratio_median": round(http["latency_ms"]["median"] / local["latency_ms"]["median"], 3),
        "throughput_ratio": round(http["recalls_per_second"] / local["recalls_per_second"], 3),
        "target": {"max_ratio_p95": RATIO_TARGET, "met": ratio_p95 <= RATIO_TARGET},
        "agreement": _agreement(local_answers, http_answers),
        "machine": machine(load_before),
    }
    return ServeMeasurement(report, local_answers, http_answers)


def format_report(report: dict[str, Any]) -> str:
    """The two sides as one table, then the ratio against the aim and the agreement."""
    from affect_memory.formatting import format_table

    table = format_table(
        ["side", "how", "recalls/s", "median ms", "p95 ms"],
        [
            [side["side"], side["how"], side["recalls_per_second"],
             side["latency_ms"]["median"], side["latency_ms"]["p95"]]
            for side in report["sides"]
        ],
    )  # fmt: skip
    target = report["target"]
    agreement = report["agreement"]
    verdict = "met" if target["met"] else "NOT met"
    return "\n".join(
        [
            f"Recall over HTTP vs in process: {report['memories']:,} memories of "
            f"{report['users']} users, {report['queries']} queries after "
            f"{report['warmup_queries']} warm-up, {report['clients']} concurrent clients a "
            f"side, top {report['top_k']} (query embedding included on both sides)",
            table,
            f"HTTP p95 / in-process p95: {report['ratio_p95']:.2f}x (median "
            f"{report['ratio_median']:.2f}x, throughput {report['throughput_ratio']:.2f}x); "
            f"aim <= {target['max_ratio_p95']:g}x: {verdict}",
            f"answers: {agreement['same_ranking']} of {agreement['queries']} queries ranked the "
            f"same over HTTP (largest score difference {agreement['max_score_difference']:.3g})",
            f"store built in {report['build_seconds']:g} s; {report['machine']['cpus']} CPUs, "
            f"1-min load average {report['machine']['load_average_1m_before']} before, "
            f"{report['machine']['load_average_1m_after']} after",
        ]
    )
