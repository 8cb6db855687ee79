"""Session fixtures for the memory plugin tests: the real model, loaded once, and a real
Chroma server (``chroma run``) on a free local port, stopped by PID at the end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from affect_memory.bench.servers import stop_process
from affect_memory.models.embeddings import Embedder, default_embedder


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


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on 127.0.0.1:``port`` (Linux's ``/proc/net/tcp``)."""
    found: set[str] = set()
    with open("/proc/net/tcp", encoding="ascii") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            address, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(address.split(":")[1], 16) == port:
                found.add(inode)
    return found


def _holds_port(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds the socket listening on ``port``: the heartbeat
    alone could be another worker's server that took the port first."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    try:
        links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return False
    return bool(wanted & links)


def _start_chroma(data: Path, config: str, log: IO[bytes]) -> tuple[subprocess.Popen[bytes], int]:
    """``chroma run`` on a free port, answering its heartbeat from its own socket; a port
    another process took first (two workers picked it) is given up for a new one."""
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists():
        pytest.fail(f"the chroma CLI is not installed next to {sys.executable}")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    for _attempt in range(5):
        port = _free_port()
        command = [
            str(chroma),
            "run",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--path",
            str(data),
        ]
        if config:
            settings = data / "chroma.yaml"
            settings.write_text(
                f'persist_path: "{data}"\nport: {port}\nlisten_address: "127.0.0.1"\n{config}',
                encoding="utf-8",
            )
            command = [str(chroma), "run", str(settings)]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1
                ) as reply:
                    if reply.status == 200 and _holds_port(process.pid, port):
                        return process, port
            except OSError:
                pass
            time.sleep(0.2)
        if process.poll() is None:
            process.kill()
        process.wait()
    pytest.fail(f"chroma run did not come up on a port of its own in 5 tries; see {log.name}")


@contextmanager
def running_chroma(data: Path, config: str = "") -> Iterator[tuple[str, int]]:
    """A ``chroma run`` server on ``data`` and a free port it holds itself: its URL and PID,
    stopped after.

    ``config`` is extra YAML for the server's config file (e.g. its index cache).
    """
    log = (data / "server.log").open("wb")
    process, port = _start_chroma(data, config, log)
    try:
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop_process(process)
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
