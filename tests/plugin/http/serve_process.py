"""``affect-memory serve`` as a real process on a free loopback port, for the HTTP tests.

``running_serve`` starts the command with ``--port 0``, waits (under a deadline, never a
fixed sleep) for the line it prints once it accepts connections, and stops it by its PID
afterwards. stdout and stderr go to files, so a test can read everything the server printed
(to check that no secret is in it) and a failure can show why the server did not start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from affect_memory.bench.servers import stop_process

ROOT = Path(__file__).resolve().parents[3]
LISTENING = "affect-memory serve: listening on "
START_TIMEOUT = 240.0
"""Seconds the server may take to start: loading the model is slow on a busy machine."""

_PASSED = ("PATH", "HOME", "TMPDIR", "VIRTUAL_ENV", "AFFECT_MEMORY_CACHE", "AFFECT_MEMORY_HOME")


def serve_command(*arguments: str) -> list[str]:
    """The command line of ``affect-memory serve`` with ``arguments`` (this interpreter's)."""
    return [sys.executable, "-m", "affect_memory.cli", "serve", *arguments]


def serve_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment for the server: offline, no telemetry, the suite's cache and home,
    plus ``extra``."""
    env = {key: os.environ[key] for key in _PASSED if key in os.environ}
    env.update(HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False", ORT_DISABLE_TELEMETRY="1")
    env.update(extra or {})
    return env


@dataclass
class ServeProcess:
    """One running ``affect-memory serve``: its URL, PID and what it printed."""

    url: str
    pid: int
    stdout: Path
    stderr: Path

    def output(self) -> str:
        """Everything the server printed so far, stdout then stderr."""
        return self.stdout.read_text(errors="replace") + self.stderr.read_text(errors="replace")


@contextmanager
def running_serve(
    data_dir: Path, *arguments: str, env: Mapping[str, str] | None = None
) -> Iterator[ServeProcess]:
    """``affect-memory serve --port 0 --data-dir DATA_DIR ARGUMENTS...`` until the block ends;
    fails the test (showing the server's output) when it exits or stays silent too long."""
    data_dir.mkdir(parents=True, exist_ok=True)
    stdout, stderr = data_dir / "serve.stdout", data_dir / "serve.stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            serve_command("--port", "0", "--data-dir", str(data_dir), *arguments),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=serve_env(env),
            cwd=str(ROOT),
        )
        try:
            url = _wait_for_address(process, stdout, stderr)
            yield ServeProcess(url, process.pid, stdout, stderr)
        finally:
            stop_process(process, patience=20)


def _wait_for_address(process: subprocess.Popen[bytes], stdout: Path, stderr: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for line in stdout.read_text(errors="replace").splitlines():
            if line.startswith(LISTENING):
                return line.removeprefix(LISTENING).strip()
        if process.poll() is not None:
            pytest.fail(
                f"affect-memory serve exited with {process.returncode}: "
                f"{stderr.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.1)  # polling the file under the deadline, not deciding an order
    pytest.fail(f"affect-memory serve did not listen within {START_TIMEOUT:g} s")
