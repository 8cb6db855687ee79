"""A store call slower than ``--timeout`` answers 504 instead of holding the server, and while one
user's call is stuck, another user's request is answered.

The slowness is real: the test process takes the memory index's SQLite write lock (``BEGIN
IMMEDIATE`` on the server's own index file), so the server's next write waits in SQLite's busy
handler, as it would behind another process's long write. Nothing in the server is patched.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.plugin.http.serve_process import ServeProcess, running_serve

TIMEOUT = 5.0
"""The server's ``--timeout``: long enough for a read on a busy machine, short for a test."""


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Path]]:
    """A server with a short ``--timeout`` and its index file."""
    data = tmp_path_factory.mktemp("api-timeout")
    index = data / "index.sqlite3"
    with running_serve(data, "--timeout", str(TIMEOUT), "--index", str(index)) as process:
        yield process, index


@contextmanager
def held_write_lock(index: Path) -> Iterator[None]:
    """Hold the SQLite write lock of ``index`` for the block, as a long writer would."""
    connection = sqlite3.connect(index, timeout=30, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def _wait(future: Future[httpx.Response], seconds: float) -> httpx.Response:
    return future.result(timeout=seconds)


def test_a_stuck_write_answers_504_while_another_user_is_served(
    slow_server: tuple[ServeProcess, Path],
) -> None:
    process, index = slow_server
    with httpx.Client(base_url=process.url, timeout=60) as client:
        for user in ("stuck", "free"):
            stored = client.post(
                f"/v1/users/{user}/memories",
                json={"records": [{"id": "first", "text": f"{user} wrote this first."}]},
            )
            assert stored.status_code == 201, stored.text
            assert client.get(f"/v1/users/{user}/memories/first").status_code == 200
        with held_write_lock(index), ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            stuck = pool.submit(
                client.post,
                "/v1/users/stuck/memories",
                json={"records": [{"id": "second", "text": "This write waits for the lock."}]},
            )
            # Ask for the other user's memory until an answer comes a second after the stuck
            # request went out (long after it reached the server) while it still waits.
            answered_meanwhile = False
            while not stuck.done() and not answered_meanwhile:
                other = client.get("/v1/users/free/memories/first")
                assert other.status_code == 200, other.text
                assert other.json()["text"] == "free wrote this first."
                answered_meanwhile = time.monotonic() - started > 1.0 and not stuck.done()
            assert answered_meanwhile, "the other user's request was not answered meanwhile"
            answer = _wait(stuck, 60)
            assert answer.status_code == 504, answer.text
            assert answer.headers["content-type"] == "application/problem+json"
            assert f"{TIMEOUT:g} s" in answer.json()["detail"]
            assert "--timeout" in answer.json()["detail"]
            assert client.get("/v1/health").status_code == 200  # the server is not held
        # The lock is gone: the abandoned write finishes in its thread, and writes work again.
        again = client.post(
            "/v1/users/stuck/memories",
            json={"records": [{"id": "third", "text": "Written once the lock was released."}]},
        )
        assert again.status_code == 201, again.text
