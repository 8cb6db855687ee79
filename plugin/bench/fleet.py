"""``affect-memory bench fleet``: many worker processes, standing in for hosts, over one
PostgreSQL state store, one ``chroma run`` server and one memory index, with random SIGKILLs.

The bench starts the Chroma server itself (a free 127.0.0.1 port, stopped by PID), works in a
PostgreSQL schema of its own (dropped afterwards), seeds every user's memories, and sends the
turns of many conversations, in random order, to whichever worker is free; a turn retrieves,
ranks, commits and applies its memory writes through the outbox. At random moments a worker is
SIGKILLed — while it holds a conversation, or just after a commit while its writes are still
being applied — and started again (a new process, which first finishes pending writes). Once
every turn is in, one worker drains the outbox and the stores are checked
(``affect_memory.bench.fleet_checks``). Reported: turns/s, p50/p95 turn overhead (turn minus
generation) and each store's share of it, what each kill hit and how long its conversation
waited, and every check.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from affect_memory.bench.common import (
    BENCH_NOW,
    add_json_option,
    load_average,
    print_report,
    sentences,
)
from affect_memory.bench.fleet_checks import Check, read_fleet, verify
from affect_memory.bench.fleet_run import PARTS, FleetRun
from affect_memory.bench.fleet_worker import WorkerConfig, make_embedder
from affect_memory.kernel.errors import InvalidInputError

__all__ = ["FleetOptions", "register", "run", "run_fleet"]

INDEX_ENV = "AFFECT_MEMORY_INDEX"
"""Environment variable naming the memory index when ``--index`` is not given."""

@dataclass(frozen=True)
class FleetOptions:
    """The shape of one fleet run."""

    workers: int = 8
    conversations: int = 50
    users: int = 10
    turns: int = 2000
    kills: int = 8
    memories_per_user: int = 30
    generation_ms: float = 6.0
    seed: int = 20261201

    def check(self) -> FleetOptions:
        """Refuse counts that cannot make a run, naming the option."""
        for name in ("workers", "conversations", "users", "turns", "memories_per_user"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"--{name.replace('_', '-')} must be >= 1, got {value!r}")
        if self.users > self.conversations:
            raise InvalidInputError(
                f"--users ({self.users}) cannot exceed --conversations ({self.conversations})"
            )
        if not 0 <= self.kills <= self.turns // 4:
            raise InvalidInputError(
                f"--kills must be between 0 and a quarter of --turns, got {self.kills}"
            )
        if not 0 <= self.generation_ms <= 1000:
            raise InvalidInputError(
                f"--generation-ms must be in [0, 1000], got {self.generation_ms}"
            )
        return self


QUICK = FleetOptions(workers=4, conversations=20, users=5, turns=200, kills=4)
"""``--quick``: the CI-sized run (4 workers, 200 turns)."""


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench fleet``."""
    full = FleetOptions()
    parser = benchmarks.add_parser(
        "fleet",
        help="worker processes over one PostgreSQL, one chroma run and one index, with kills",
        description=(
            f"Run {full.workers} worker processes (each its own connection pool) over "
            f"{full.conversations} conversations of {full.users} users for {full.turns:,} "
            "turns with retrieval and the memory turn effects on, against one PostgreSQL "
            "state store (--state; a schema of its own, dropped afterwards), a chroma run "
            "server the bench starts, and the memory index (--index); SIGKILL random workers "
            "and restart them; report turns/s, p50/p95 overhead and each store's share, and "
            "check pairing, serial replay, exactly-once outbox, recall counts and isolation."
        ),
    )
    parser.add_argument(
        "--state",
        metavar="URL",
        default=None,
        help="the PostgreSQL server: postgresql://USER@HOST:PORT/DB[?schema=NEW_OR_EMPTY] "
        "(default $AFFECT_MEMORY_STATE)",
    )
    parser.add_argument(
        "--index",
        metavar="URL",
        default=None,
        help=f"the memory index (default ${INDEX_ENV}, else the --state server in a schema "
        "of its own)",
    )
    for name, what in (
        ("workers", "worker processes"),
        ("conversations", "conversations"),
        ("users", "users (conversations are shared out between them)"),
        ("turns", "turns to commit at least"),
        ("kills", "workers to SIGKILL during the run"),
        ("memories-per-user", "memories seeded per user"),
        ("seed", "random seed"),
    ):
        default = getattr(full, name.replace("-", "_"))
        parser.add_argument(f"--{name}", type=int, default=None, help=f"{what} ({default})")
    parser.add_argument(
        "--generation-ms",
        type=float,
        default=None,
        help=f"scripted generation time per reply, excluded from overhead ({full.generation_ms:g})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="4 workers, 200 turns, 4 kills (the CI size)"
    )
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the fleet and print its report; exit 1 when a check failed."""
    from affect_memory.state.location import STATE_ENV

    base = QUICK if args.quick else FleetOptions()
    given = {
        field: getattr(args, field)
        for field in asdict(base)
        if getattr(args, field, None) is not None
    }
    options = FleetOptions(**{**asdict(base), **given}).check()
    state, source = args.state, "--state"
    if state is None:
        state, source = os.environ.get(STATE_ENV), f"${STATE_ENV}"
    if not state:
        raise InvalidInputError(
            "bench fleet needs a PostgreSQL server: pass --state postgresql://USER@HOST:PORT/DB "
            f"or set ${STATE_ENV}"
        )
    index = args.index or os.environ.get(INDEX_ENV) or None
    if index is not None:
        from affect_memory.bench.servers import require_empty_index

        require_empty_index(index, source="--index" if args.index else f"${INDEX_ENV}")
    report = run_fleet(state, options, index=index, source=source, progress=not args.json)
    print_report(report, as_json=args.json, text=format_report)
    return 0 if all(check["ok"] for check in report["checks"]) else 1


def run_fleet(
    state_url: str,
    options: FleetOptions,
    *,
    index: str | None = None,
    source: str = "state_url",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the fleet against the PostgreSQL server ``state_url`` names; the JSON-ready report."""
    from contextlib import ExitStack

    from affect_memory.bench.servers import bench_schema, chroma_server

    options.check()
    load_before = load_average()
    phases: dict[str, float] = {}
    mark = [time.monotonic()]

    def lap(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(now - mark[0], 2)
        mark[0] = now

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="affect-fleet-")))
        store_url = stack.enter_context(
            bench_schema(state_url, prefix="bench_fleet", source=source)
        )
        index_url = index if index is not None else _index_url(stack, state_url, source)
        (tmp / "chroma").mkdir()
        chroma = stack.enter_context(chroma_server(tmp / "chroma"))
        lap("servers")
        users = [f"user-{number:02d}" for number in range(options.users)]
        conversations = {
            f"conv-{number:02d}": users[number % len(users)]
            for number in range(options.conversations)
        }
        seeded = _seed(chroma.url, index_url, users, options)
        lap("seed")
        config = WorkerConfig(
            state_url=store_url,
            chroma_url=chroma.url,
            collection="fleet",
            index_url=index_url,
            started_at=time.time(),
            generation_seconds=options.generation_ms / 1000,
            log_dir=str(tmp),
        )
        run = FleetRun(config, options, conversations, tmp, progress)
        run.start_workers()
        lap("workers_start")
        try:
            run.dispatch_all()
            lap("turns")
        finally:
            run.stop_workers()
        lap("stop_and_drain")
        checks, committed = _check(store_url, chroma.url, index_url, conversations, seeded)
        lap("checks")
        report = run.report(checks, committed)
    report["phases_s"] = phases
    report["load_average_1min"] = {"before": load_before, "after": load_average()}
    report["stores"] = {
        "state": "postgresql",
        "chroma": "chroma run (one server, 127.0.0.1)",
        "index": "postgresql" if index_url else "none (Chroma metadata counts)",
    }
    report["servers"] = {
        "state": _schema_of(store_url),
        "index": None if index_url is None else _schema_of(index_url),
        "chroma_url": chroma.url,
        "chroma_pid": chroma.pid,
    }
    return report


def _schema_of(url: str) -> str | None:
    """The ``schema=`` a store URL gives."""
    from urllib.parse import parse_qs, urlsplit

    found = parse_qs(urlsplit(url).query).get("schema")
    return found[0] if found else None


def _index_url(stack: Any, state_url: str, source: str) -> str | None:
    """The index on the state server in a schema of its own, where ``ChromaMemory`` takes one."""
    import inspect

    from affect_memory import ChromaMemory
    from affect_memory.bench.servers import bench_schema

    if "index" not in inspect.signature(ChromaMemory).parameters:
        return None  # this version keeps recall counts in Chroma's metadata
    url: str = stack.enter_context(
        bench_schema(state_url, prefix="bench_fleet_index", source=source, store=False)
    )
    return url


def _seed(
    chroma_url: str, index_url: str | None, users: list[str], options: FleetOptions
) -> dict[str, set[str]]:
    """Each user's memories, ids ``USER-mNNN``, stored once by the parent."""
    from affect_memory import ChromaMemory

    rng = random.Random(options.seed)
    texts = sentences(len(users) * options.memories_per_user, seed=options.seed)
    extra: dict[str, Any] = {} if index_url is None else {"index": index_url}
    records = []
    seeded: dict[str, set[str]] = {user: set() for user in users}
    for number, text in enumerate(texts):
        user = users[number % len(users)]
        ident = f"{user}-m{number // len(users):03d}"
        seeded[user].add(ident)
        records.append(
            {
                "id": ident,
                "text": text,
                "user_id": user,
                "timestamp": (BENCH_NOW - timedelta(days=rng.uniform(1, 365))).isoformat(),
                "significance": round(rng.random(), 3),
                "emotional_valence": round(rng.uniform(-1, 1), 3),
            }
        )
    embedder = make_embedder()
    with ChromaMemory(
        chroma_url, collection="fleet", embedder=embedder, timeout=60.0, progress=False, **extra
    ) as memory:
        memory.add(records, progress=False)
    return seeded


def _check(
    store_url: str,
    chroma_url: str,
    index_url: str | None,
    conversations: dict[str, str],
    seeded: dict[str, set[str]],
) -> tuple[list[Check], set[str]]:
    """Read what the stores hold and check it; also every committed user message."""
    import psycopg

    from affect_memory import ChromaMemory, MemoryTurnEffects, open_state_store
    from affect_memory.state.location import parse_state_url

    location = parse_state_url(store_url)
    schema = str(location.options["schema"])

    def outbox_rows() -> list[tuple[Any, ...]]:
        with psycopg.connect(location.target, autocommit=True) as connection:
            return connection.execute(
                f'SELECT id, conversation_id, payload, applied FROM "{schema}".outbox '
                "WHERE topic = %s ORDER BY seq",
                (MemoryTurnEffects.topic,),
            ).fetchall()

    store = open_state_store(store_url)
    try:
        data = asyncio.run(read_fleet(store, conversations, outbox_rows))
    finally:
        store.close()
    extra: dict[str, Any] = {} if index_url is None else {"index": index_url}
    with ChromaMemory(
        chroma_url,
        collection="fleet",
        embedder=make_embedder(),
        timeout=60.0,
        progress=False,
        **extra,
    ) as m:

        def counts(user: str, ids: list[str]) -> list[int]:
            found = {record.id: record.recall_count for record in m.get(ids, user_id=user)}
            return [found.get(ident, 0) for ident in ids]

        def present(user: str, ids: list[str]) -> set[str]:
            return {record.id for record in m.get(ids, user_id=user)}

        committed = {
            message.content
            for transcript in data.transcripts.values()
            for message in transcript
            if message.role == "user"
        }
        return verify(data, conversations, seeded, counts, present), committed


def format_report(report: dict[str, Any]) -> str:
    """The report as tables: throughput and overhead, each store's share, kills, checks."""
    from affect_memory.formatting import format_table

    options = report["options"]
    head = (
        f"{options['workers']} workers, {options['conversations']} conversations of "
        f"{options['users']} users, {report['turns']:,} turns in {report['seconds']:.1f} s: "
        f"{report['turns_per_second']:.1f} turns/s; overhead (turn - generation) p50 "
        f"{report['overhead_ms']['median']:.2f} ms, p95 {report['overhead_ms']['p95']:.2f} ms; "
        f"{report['restarts']} workers killed and restarted, {report['failed_turns']} turns failed"
    )
    shares = format_table(
        ["part of the overhead", "p50 ms", "p95 ms", "share"],
        [
            [part, report["parts_ms"][part]["median"], report["parts_ms"][part]["p95"],
             f"{100 * report['parts_share'][part]:.1f}%"]
            for part in PARTS
        ],
    )  # fmt: skip
    checks = format_table(
        ["check", "ok", "detail"],
        [[check["name"], "yes" if check["ok"] else "NO", check["detail"]]
         for check in report["checks"]],
    )  # fmt: skip
    stores = ", ".join(f"{name}: {kind}" for name, kind in report["stores"].items())
    return "\n\n".join([head, shares, checks, f"stores: {stores}; {report['cpu_count']} CPUs"])
