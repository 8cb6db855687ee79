"""Recall counts are exact under concurrent writers: two processes over one ``chroma run``
server and one index (SQLite file, PostgreSQL) recalling the same memories lose no increment,
and a turn replayed by both counts once.

Through Chroma's metadata (get, then update) two such processes lost 38-42% of the
increments (/tmp/chroma-research, q6); the index counts with a unique key per (memory, turn)
and an atomic ``recall_count + 1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.index.consistency.rehearsal_worker import RECALLED
from tests.plugin.state.postgres_fixture import server_url, temporary_schema

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[5]
WORKER = Path(__file__).with_name("rehearsal_worker.py")
TURNS = 150


@pytest.fixture(params=["sqlite", "postgresql"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "index.sqlite3")
        return
    url = server_url()
    with temporary_schema(url) as schema:
        yield f"{url}?schema={schema}"


def _race(url: str, index: str, names: list[str], tmp_path: Path) -> None:
    # A start file of its own each race: with an old one present the workers would not wait,
    # and "done" could arrive in readline's buffer, which communicate() never reads.
    start = tmp_path / f"start-{'-'.join(names)}-{len(list(tmp_path.glob('start-*')))}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, index, name, str(TURNS), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in names
    ]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline().strip()
        assert line == "ready", worker.stderr.read() if worker.stderr else line
    start.touch()
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0 and out.strip() == "done", err[-2000:]


def test_two_processes_recalling_the_same_memories_lose_no_increment(
    own_chroma_server: tuple[str, int], index: str, tmp_path: Path, embedder: Embedder
) -> None:
    url, _pid = own_chroma_server
    with ChromaMemory(url, index=index, embedder=embedder) as memory:
        memory.add(
            [
                {"id": ident, "text": f"note {ident}", "user_id": "ann",
                 "timestamp": "2025-12-01T00:00:00Z"}
                for ident in RECALLED
            ]
        )
    started = time.monotonic()
    _race(url, index, ["a", "b"], tmp_path)
    assert time.monotonic() - started < 600
    _race(url, index, ["a", "b"], tmp_path)  # both replay their turns: nothing changes
    with ChromaMemory(url, index=index, embedder=embedder) as memory:
        counts = memory.index.rehearsal("ann", RECALLED).recall_counts.tolist()
        assert counts == [2 * TURNS] * len(RECALLED)
        assert [r.recall_count for r in memory.get(RECALLED, user_id="ann")] == counts
