"""The embedded store lock under real processes: a removed lock file lets no second writer in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from affect_memory.memory.chroma.locks import LOCK_FILE

ROOT = Path(__file__).resolve().parents[4]

_OPEN = """
import sys
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.errors import StoreLockedError
try:
    client, lock = open_client(parse_location(sys.argv[1]))
except StoreLockedError as error:
    print("REFUSED", error, flush=True)
    raise SystemExit(3)
print("OPENED", flush=True)
if sys.argv[2] == "hold":
    sys.stdin.readline()
lock.release()
"""


def _open(directory: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _OPEN, str(directory), mode],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )


def _try_open(directory: Path) -> tuple[int, str]:
    process = _open(directory, "once")
    out, err = process.communicate(timeout=120)
    assert "Traceback" not in err, err
    return process.returncode, out.strip()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    process = _open(tmp_path, "hold")
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline().strip()
    if line != "OPENED":
        process.kill()
        pytest.fail(f"the holder did not open the store: {line!r} {process.stderr.read()}")
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def test_a_second_process_is_refused_while_the_store_is_held(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    code, out = _try_open(tmp_path)
    assert code == 3 and out.startswith("REFUSED") and f"pid {holder.pid}" in out


def test_removing_the_lock_file_while_held_lets_no_second_process_in(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    (tmp_path / LOCK_FILE).unlink()
    code, out = _try_open(tmp_path)
    assert code == 3 and out.startswith("REFUSED"), out
    assert "in use by another process" in out
    holder.communicate("\n", timeout=60)  # the holder closes the store cleanly
    assert holder.returncode == 0
    assert _try_open(tmp_path) == (0, "OPENED")


def test_a_killed_holder_leaves_no_lock(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.kill()
    holder.wait(timeout=30)
    assert _try_open(tmp_path) == (0, "OPENED")


_HOLD_LIKE_MCP = """
import sys
from affect_memory.memory.store import ChromaMemory
with ChromaMemory(sys.argv[1], progress=False) as memory:  # as the MCP server holds it
    memory.add([{"id": "m1", "text": "I keep bees.", "user_id": "ann",
                 "timestamp": "2026-05-01T12:00:00Z"}])
    print("HOLDING", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def mcp_like_holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process holding ``tmp_path/chroma`` open as the MCP server does, until told to go;
    it says ``HOLDING`` once it holds the store (the readiness signal, no sleeps)."""
    script = tmp_path / "mcp_like_holder.py"
    script.write_text(_HOLD_LIKE_MCP, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "chroma")],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline().strip()
    if line != "HOLDING":
        process.kill()
        pytest.fail(f"the holder did not hold the store: {line!r} {process.stderr.read()}")
    yield process
    if process.poll() is None:
        process.communicate("\n", timeout=60)


@pytest.mark.parametrize(
    "command",
    [["stats"], ["recall", "What do I keep?", "--user-id", "ann"]],
    ids=["stats", "recall"],
)
def test_a_reader_blocked_by_a_holder_names_its_process_and_the_path_in_one_line(
    tmp_path: Path, mcp_like_holder: subprocess.Popen[str], command: list[str]
) -> None:
    reader = subprocess.run(
        [sys.executable, "-m", "affect_memory", *command, "--data-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert reader.returncode == 2, reader.stderr
    assert reader.stdout == "" and "Traceback" not in reader.stderr
    lines = reader.stderr.strip().splitlines()
    assert len(lines) == 1, reader.stderr
    assert str(tmp_path / "chroma") in lines[0]
    assert f"pid {mcp_like_holder.pid}: " in lines[0] and "mcp_like_holder.py" in lines[0]
    # Once the holder is gone the same read succeeds.
    mcp_like_holder.communicate("\n", timeout=60)
    again = subprocess.run(
        [sys.executable, "-m", "affect_memory", *command, "--data-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert again.returncode == 0, again.stderr
