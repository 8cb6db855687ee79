"""Session fixtures for the memory plugin tests: the real model, loaded once, and a real
Chroma server (``chroma run``) on a free local port, stopped by PID at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from plugin.models.embeddings import Embedder, default_embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default embedder (the bundled all-MiniLM-L6-v2 on ONNX Runtime), loaded once."""
    model = default_embedder()
    assert model.dimension == 384
    return model


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_chroma(data: Path, config: str = "") -> Iterator[tuple[str, int]]:
    """A ``chroma run`` server on ``data`` and a free port: its URL and PID, stopped after.

    ``config`` is extra YAML for the server's config file (e.g. its index cache).
    """
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists():
        pytest.fail(f"the chroma CLI is not installed next to {sys.executable}")
    port = _free_port()
    log = (data / "server.log").open("wb")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    command = [str(chroma), "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(data)]
    if config:
        settings = data / "chroma.yaml"
        settings.write_text(
            f'persist_path: "{data}"\nport: {port}\nlisten_address: "127.0.0.1"\n{config}',
            encoding="utf-8",
        )
        command = [str(chroma), "run", str(settings)]
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"chroma run exited with {process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("chroma run did not answer its heartbeat within 60 s")
            time.sleep(0.2)
        yield url, process.pid
    finally:
        os.kill(process.pid, signal.SIGCONT)  # a test may have left it stopped
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a ``chroma run`` server on a temporary directory, shared by the session."""
    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as (url, _pid):
        yield url


@pytest.fixture
def own_chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A ``chroma run`` server of one test's own (URL and PID), for tests that stop it."""
    with running_chroma(tmp_path_factory.mktemp("own-chroma-server")) as server:
        yield server
