"""An embedded store on a full disk: one line naming it, exit 2, and no lock left held."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from affect_memory.errors import StoreUnavailableError
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.chroma.locks import LOCK_FILE, PathLock, holder_pids

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own (root only): filling it is a real ENOSPC, not a mock."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Write a file until the disk is full; the file, to free the space again."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)
    return filler


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_full_disk_is_one_line_and_leaves_no_lock_held_for_the_same_process(
    small_disk: Path,
) -> None:
    store = small_disk / "chroma"
    store.mkdir()
    PathLock(store).release()  # the lock file exists, emptied, as every release leaves it
    assert (store / LOCK_FILE).stat().st_size == 0
    filler = _fill(small_disk)
    before = _open_fds()
    with pytest.raises(StoreUnavailableError) as refused:
        PathLock(store)
    message = str(refused.value)
    assert "\n" not in message and "the disk is full" in message and str(store) in message
    assert _open_fds() <= before  # both descriptors closed, so both flocks dropped
    assert holder_pids(store) == []

    shell = subprocess.run(
        [sys.executable, "-m", "affect_memory", "stats", "--data-dir", str(small_disk)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"},
    )
    assert shell.returncode == 2, shell.stderr
    assert shell.stderr.count("\n") == 1 and "the disk is full" in shell.stderr
    assert "Traceback" not in shell.stderr

    filler.unlink()  # space freed: this very process opens the store again
    client, lock = open_client(parse_location(str(store)))
    try:
        assert lock is not None
        assert (store / LOCK_FILE).read_text(encoding="ascii") == str(os.getpid())
    finally:
        client.close()
        if lock is not None:
            lock.release()
