"""An ``affect-memory erase`` killed (SIGKILL) right after each of its steps leaves no user
half erased: the next open of the store finishes the memory steps before anything reads, and
running erase again finishes the rest. User B, holding the same memory ids, keeps everything.

The worker (``erase_worker.py``) is the real CLI in its own process, killing itself after the
chosen step ran whole, so the order is decided by the code, not by timing. Configurations: the
embedded store with its SQLite index and a SQLite state store, and with a PostgreSQL index and
a PostgreSQL state store.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from affect_memory.cli.main import main
from affect_memory.memory.erasure import ERASE_STEPS
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from affect_memory.state.location import open_state_store
from tests.plugin.memory.data_rights_fixtures import (
    IDS,
    USER_A,
    USER_B,
    assert_no_trace,
    index_setting,
    seed,
    segment_dirs,
    snapshot,
)
from tests.plugin.state.user_data import held, mentions, seed_conversations, state_location

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("erase_worker.py")


@pytest.mark.parametrize("step", ["state", *ERASE_STEPS])
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_kill_after_any_step_then_a_rerun_leaves_nothing_of_a_and_all_of_b(
    kind: str, step: str, tmp_path: Path, embedder: Embedder
) -> None:
    data = tmp_path / "data"
    path = data / "chroma"
    with index_setting(kind, tmp_path) as index, state_location(kind, tmp_path) as (url, where):
        with ChromaMemory(path, index=index, embedder=embedder) as memory:
            seed(memory)
            kept = snapshot(memory, USER_B)
            whole = snapshot(memory, USER_A)
            segments = segment_dirs(path, memory, USER_A)
        store = open_state_store(url)
        try:
            asyncio.run(seed_conversations(store))
        finally:
            store.close()
        arguments = ["--user-id", USER_A, "--yes", "--data-dir", str(data), "--state", url]
        if index is not None:
            arguments += ["--index", index]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        killed = subprocess.run(
            [sys.executable, str(WORKER), step, *arguments],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
        assert mentions(held(kind, where), USER_A) == []  # the state went first, whole
        with ChromaMemory(path, index=index, embedder=embedder) as reopened:
            # the open finished a started erasure; one not started left A whole
            if step == "state":
                assert snapshot(reopened, USER_A) == whole
            else:
                assert_no_trace(reopened, USER_A)
                assert not any(segment.exists() for segment in segments)
            assert snapshot(reopened, USER_B) == kept
        assert main(["erase", *arguments]) == 0  # the rerun
        with ChromaMemory(path, index=index, embedder=embedder) as final:
            assert_no_trace(final, USER_A)
            assert not any(segment.exists() for segment in segments)
            assert snapshot(final, USER_B) == kept and len(kept) == len(IDS)
            assert final.stats().users == {USER_B: len(IDS)}
        rows = held(kind, where)
        assert mentions(rows, USER_A) == [] and rows["conversations"] == [("bob-1",)]
