"""One ``affect-memory mcp`` process on stdio, for the tests that write its JSON-RPC by hand."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


class McpProcess:
    """``affect-memory mcp --data-dir DIR``: raw lines in, reply lines out under a deadline."""

    def __init__(self, data_dir: Path, *, errlog: str = "stderr.log") -> None:
        """Start the server on ``data_dir``; its stderr goes to ``data_dir / errlog``."""
        env = {
            key: os.environ[key]
            for key in ("PYTHONPATH", "HF_HOME", "TMPDIR", "VIRTUAL_ENV", "PATH")
            if key in os.environ
        }
        env.update(HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
        env.update({k: v for k, v in os.environ.items() if k.startswith("AFFECT_MEMORY_")})
        self._errlog = (data_dir / errlog).open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "affect_memory.cli", "mcp", "--data-dir", str(data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errlog,
            cwd=ROOT,
            env=env,
        )
        self._buffer = b""

    def send(self, line: str | bytes) -> None:
        """Write one line (a newline is added)."""
        assert self.process.stdin is not None
        data = line.encode() if isinstance(line, str) else line
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def line(self, timeout: float, waiting_for: str = "a reply") -> dict[str, Any]:
        """The next reply line, parsed; fails when none comes within ``timeout``."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            if not ready:
                pytest.fail(f"no {waiting_for} within {timeout:.0f} s")
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                pytest.fail(
                    f"the server closed stdout before {waiting_for} (exit {self.process.poll()})"
                )
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def reply(self, ident: Any, timeout: float) -> dict[str, Any]:
        """The response to request ``ident`` (replies to others are passed over); fails when
        none comes within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(deadline - time.monotonic(), 0.0)
            message = self.line(left, waiting_for=f"reply to request {ident}")
            if message.get("id") == ident:
                return message

    def close(self) -> None:
        """Close stdin, which ends the server, and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._errlog.close()
