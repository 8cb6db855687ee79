"""A writer killed (SIGKILL) anywhere in add, upsert, forget or a turn's writes leaves Chroma
and the memory index holding exactly the same ids and texts per user, with exact BM25
totals, nothing pending once settled, recall working, and recall counts exact.

Workers (``crash_worker.py``) are real processes writing through ``ChromaMemory``; they are
killed at random times, or kill themselves at a chosen step (journal committed, Chroma
written, inside the settling or counting transaction). Configurations: an embedded store
with its default index, and a ``chroma run`` server with a SQLite and a PostgreSQL index.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from affect_memory.memory.chroma.segment_repair import METADATA_FILE, damaged_segments
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.conftest import running_chroma
from tests.plugin.memory.index.consistency.checks import assert_consistent
from tests.plugin.memory.index.crash_worker import KINDS, USERS, seed
from tests.plugin.state.postgres_fixture import server_url, temporary_schema

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]
WORKER = Path(__file__).with_name("crash_worker.py")
READY_TIMEOUT = 180.0
Lines = queue.Queue[str | None]
"""A worker's stdout, line by line, then None at its end."""


@dataclass(frozen=True)
class Setup:
    """Where the workers write: a Chroma location and an index (``-``: the default one)."""

    location: str
    index: str
    log: Path

    def open(self, embedder: Embedder) -> ChromaMemory:
        return ChromaMemory(
            self.location, index=None if self.index == "-" else self.index, embedder=embedder
        )


@contextmanager
def configured(config: str, tmp_path: Path, factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """A store of its own in one configuration (a server of its own, for a fresh layout)."""
    log = tmp_path / "turns.jsonl"
    if config == "embedded":
        yield Setup(str(tmp_path / "chroma"), "-", log)
        return
    if config == "server-sqlite":
        with running_chroma(factory.mktemp("crash-chroma")) as (url, _pid):
            yield Setup(url, str(tmp_path / "index.sqlite3"), log)
        return
    pg = server_url()
    with temporary_schema(pg) as schema, running_chroma(factory.mktemp("crash-chroma")) as (
        url,
        _pid,
    ):
        yield Setup(url, f"{pg}?schema={schema}", log)


@pytest.fixture(params=["embedded", "server-sqlite", "server-postgresql"])
def setup(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    """Each configuration."""
    with configured(request.param, tmp_path, tmp_path_factory) as chosen:
        yield chosen


def _start(
    setup: Setup, mode: str, seed_value: int, *kill: str
) -> tuple[subprocess.Popen[str], Lines]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            setup.location,
            setup.index,
            mode,
            str(seed_value),
            str(setup.log),
            *kill,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    lines: Lines = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.strip())
        lines.put(None)  # the end of the worker's output

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def _next(lines: Lines, timeout: float) -> str | None:
    """The next line, or None at the end of the output (left there for later readers)."""
    line = lines.get(timeout=timeout)
    if line is None:
        lines.put(None)
    return line


def _wait_ready(process: subprocess.Popen[str], lines: Lines) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            if _next(lines, 0.5) == "ready":
                return
        except queue.Empty:
            pass
        if process.poll() is not None:
            stderr = process.stderr.read() if process.stderr else ""
            pytest.fail(f"worker exited with {process.returncode} before ready: {stderr[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("worker never became ready")


def _ops(lines: Lines) -> int:
    """How many ops the rest of a dead worker's output begins (read to its end)."""
    seen = 0
    while (line := _next(lines, READY_TIMEOUT)) is not None:
        seen += line.startswith("op ")
    return seen


def kill_at_random(setup: Setup, mode: str, seed_value: int, rng: random.Random) -> int:
    """Run a worker, SIGKILL it at a random moment of its writes; how many ops it began."""
    process, lines = _start(setup, mode, seed_value)
    _wait_ready(process, lines)
    # Two ops begun first, so a loaded machine's slow start cannot leave a round with no write
    # to interrupt; the kill then lands at a moment nobody chose.
    begun = _wait_ops(process, lines, 2)
    time.sleep(rng.uniform(0.05, 2.5))
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    return begun + _ops(lines)


def _wait_ops(process: subprocess.Popen[str], lines: Lines, count: int) -> int:
    """Wait until the worker has begun ``count`` ops (or ended); how many it began."""
    deadline = time.monotonic() + READY_TIMEOUT
    seen = 0
    while seen < count and process.poll() is None and time.monotonic() < deadline:
        try:
            line = _next(lines, 0.5)
        except queue.Empty:
            continue
        if line is None:
            break
        seen += line.startswith("op ")
    return seen


def kill_at_step(setup: Setup, mode: str, seed_value: int, point: str, call: int) -> int:
    """Run a worker that kills itself at ``point`` the ``call``-th time; how many ops it began."""
    process, lines = _start(setup, mode, seed_value, point, str(call))
    _wait_ready(process, lines)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"the worker never reached {point} #{call}")
    assert process.returncode == -signal.SIGKILL, process.stderr.read() if process.stderr else ""
    return _ops(lines)


def check(setup: Setup, embedder: Embedder) -> dict[str, int]:
    """Reopen the store as the next process would and check it whole."""
    if not setup.location.startswith("http"):
        # chromadb keeps one system per embedded path per process and does not notice that
        # another process wrote the path since (reads then fail with "Error finding id"):
        # forget it, as a fresh process would start.
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
    with setup.open(embedder) as memory:
        sizes = assert_consistent(memory, USERS)
        for user in USERS:
            if sizes[user]:
                ident = sorted(memory.index.audit(user).texts)[0]
                (stored,) = memory.get([ident], user_id=user)
                hits = memory.index.lexical_search(user, stored.text, 50)
                assert ident in hits.ids
                assert ident in [hit.id for hit in memory.recall(stored.text, user).results]
    return sizes


def test_random_kills_leave_chroma_and_the_index_identical(
    setup: Setup, embedder: Embedder
) -> None:
    rng = random.Random(7)
    ops = 0
    # Every step of every write kind is killed deterministically below: the random rounds only
    # add kills at moments nobody chose, so three per configuration suffice.
    for iteration in range(3):
        ops += kill_at_random(setup, "mixed", 100 + iteration, rng)
        check(setup, embedder)
    assert ops >= 5, "the workers were killed before they wrote anything"


STEPS = ("announced", "written", "settling")
STEP_KILLS = [
    *[("embedded", point, kind, False) for point in STEPS for kind in KINDS],
    *[("server-postgresql", "written", kind, False) for kind in KINDS],
    *[("embedded", point, kind, True) for point in STEPS for kind in KINDS],
]
"""Every step of every write kind embedded; over a server with PostgreSQL, the Chroma step;
and every embedded one again with each user's segment metadata truncated after the kill."""


@pytest.mark.parametrize(("config", "point", "kind", "truncated"), STEP_KILLS)
def test_a_kill_at_each_step_of_each_write_is_settled_on_reopening(
    config: str,
    point: str,
    kind: str,
    truncated: bool,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    embedder: Embedder,
) -> None:
    """``truncated``: chromadb rewrites each vector segment's metadata file in place on every
    sync, so a kill can leave it empty too (seen in the random rounds); with the write's
    journal entries pending, the rebuild on opening must still leave the two identical."""
    with configured(config, tmp_path, tmp_path_factory) as setup:
        with setup.open(embedder) as memory:
            seed(memory)
        check(setup, embedder)
        kill_at_step(setup, kind, 300, point, 2)
        if point != "settling":
            assert _journal_entries(setup) > 0, "the killed write left no journal entry"
        store = Path(setup.location)
        if truncated:
            for segment in store.iterdir():
                if (segment / METADATA_FILE).is_file():
                    (segment / METADATA_FILE).write_bytes(b"")
            assert len(damaged_segments(store)) == len(USERS)
        check(setup, embedder)
        if truncated:
            assert damaged_segments(store) == []


def _journal_entries(setup: Setup) -> int:
    """Journal entries in the index as the killed worker left it (before anyone settles)."""
    from affect_memory.memory.chroma.location import parse_location
    from affect_memory.memory.index.storage.opening import open_backend, resolve_index

    spec = None if setup.index == "-" else setup.index
    backend = open_backend(resolve_index(spec, parse_location(setup.location)), lock_timeout=5)
    try:
        row = backend.read(lambda tx: tx.one("SELECT COUNT(*) FROM index_journal"))
    finally:
        backend.close()
    return int(row[0]) if row else 0


def test_recall_counts_stay_exact_through_kills_and_replays(
    setup: Setup, embedder: Embedder
) -> None:
    with setup.open(embedder) as memory:
        seed(memory)
    check(setup, embedder)  # and forget the embedded system before the workers write
    rng = random.Random(11)
    for iteration in range(2):  # the kill inside the counting transaction follows
        kill_at_random(setup, "turns", 500 + iteration, rng)
    kill_at_step(setup, "turns", 600, "counting", 3)
    turns = [json.loads(line) for line in setup.log.read_text().splitlines() if line.strip()]
    assert len(turns) >= 4
    check(setup, embedder)
    with setup.open(embedder) as memory:
        # What the outbox does after a crash: apply every logged turn again.
        for turn in turns:
            memory.apply_turn_writes(turn.pop("turn_id"), **turn)
        expected: Counter[tuple[str, str]] = Counter(
            (turn["user_id"], ident) for turn in turns for ident in turn["recalled_ids"]
        )
        for user in USERS:
            ids = [f"s{i}" for i in range(30)]
            counts = memory.index.rehearsal(user, ids).recall_counts.tolist()
            assert counts == [expected[(user, ident)] for ident in ids], user
            messages = sum(1 for turn in turns if turn["user_id"] == user)
            assert memory.count(user) == 30 + messages, user
        assert_consistent(memory, USERS)
