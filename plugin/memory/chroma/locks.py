"""The exclusive OS lock an embedded store directory is held with, one holder process at a time.

chromadb 1.5.9 silently loses vectors when two processes write one directory, so opening an
embedded store locks it; objects of one process share the lock (Chroma shares one system per
path inside a process), and a second process is refused with a pointer to server mode.
Read-only commands are refused too: opening a ``PersistentClient`` writes ``chroma.sqlite3``
(measured with chromadb 1.5.9: every open changes its content before anything is read), and
two opens at once raced in Chroma's start-up, so readers cannot share a path either. The
refusal is one line naming the path and each process holding it, with its command line.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from contextlib import suppress
from pathlib import Path
from typing import ClassVar

from affect_memory.errors import StoreLockedError, StoreUnavailableError

__all__ = ["LOCK_FILE", "PathLock", "holder_description", "holder_pids"]

LOCK_FILE = ".affect-memory.lock"
"""The lock file inside an embedded store's directory."""

_COMMAND_WIDTH = 200


def _lock_failure(lock_path: Path, error: OSError) -> str:
    """One line for a lock that could not be taken or written, naming a full disk as such."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"cannot lock the embedded store {lock_path.parent}: the disk is full "
            f"({error.strerror or error}, writing {lock_path.name}); free some space and retry"
        )
    return f"cannot lock the embedded store {lock_path.parent}: {error}"


def holder_pids(directory: Path) -> list[int]:
    """The processes holding an ``flock`` on ``directory`` (Linux's ``/proc/locks``), else the
    pid the holder wrote into ``LOCK_FILE``; empty if neither says."""
    found: list[int] = []
    try:
        status = os.stat(directory)
        with open("/proc/locks", encoding="ascii") as table:
            lines = table.read().splitlines()
    except OSError:
        lines = []
    else:
        device = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
        for line in lines:
            fields = line.split()
            # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; a waiter's line has "->".
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
                with suppress(ValueError):
                    found.append(int(fields[4]))
    if not found:
        with suppress(OSError, ValueError):
            found.append(int((directory / LOCK_FILE).read_bytes()[:32].decode("ascii").strip()))
    return sorted(set(found))


def _command_line(pid: int) -> str | None:
    """``pid``'s command line, shortened to one line, or None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    command = " ".join(part for part in raw.decode("utf-8", "replace").split("\0") if part)
    command = " ".join(command.split())  # never a line break in a one-line message
    if len(command) > _COMMAND_WIDTH:
        command = command[: _COMMAND_WIDTH - 1] + "…"
    return command or None


def holder_description(directory: Path) -> str:
    """Who holds ``directory``'s lock, for one line: each pid with its command line."""
    pids = holder_pids(directory)
    if not pids:
        return "pid unknown"
    described = []
    for pid in pids:
        command = _command_line(pid)
        described.append(f"pid {pid}" + (f": {command}" if command else ""))
    return "; ".join(described)


class PathLock:
    """An exclusive, process-wide lock on an embedded store directory, shared within a process.

    The lock is an ``flock`` on the directory itself, which cannot be removed from under its
    holder the way a lock file can (a second process would then lock a fresh file and write
    the same path). ``LOCK_FILE`` is locked too, for builds that lock only the file, and names
    the holder's pid for the refusal message.
    """

    _held: ClassVar[dict[str, tuple[tuple[int, int], int]]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, directory: Path) -> None:
        """Take the lock on ``directory``, or share this process's hold on it."""
        self._key = os.path.realpath(directory)
        self._released = False
        with PathLock._guard:
            held = PathLock._held.get(self._key)
            if held is not None:
                PathLock._held[self._key] = (held[0], held[1] + 1)
                return
            fds = self._acquire(directory)
            PathLock._held[self._key] = (fds, 1)

    @staticmethod
    def _acquire(directory: Path) -> tuple[int, int]:
        lock_path = directory / LOCK_FILE
        try:
            directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise StoreUnavailableError(f"cannot open {directory} to lock it: {error}") from None
        file_fd = -1
        try:
            fcntl.flock(directory_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            file_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(file_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            for fd in (file_fd, directory_fd):
                if fd >= 0:
                    os.close(fd)
            if not isinstance(error, BlockingIOError):
                raise StoreUnavailableError(_lock_failure(lock_path, error)) from None
            raise StoreLockedError(
                f"the embedded store {directory} is in use by another process "
                f"({holder_description(directory)}); an embedded path serves one process at "
                "a time, readers included (opening one writes to it) - stop that process, or "
                f"for several processes run `chroma run --path {directory} --port 8000` and "
                "pass --chroma http://127.0.0.1:8000"
            ) from None
        try:
            os.ftruncate(file_fd, 0)
            os.pwrite(file_fd, str(os.getpid()).encode("ascii"), 0)
        except OSError as error:
            # Closing both descriptors drops both flocks: nothing stays held by this process.
            for fd in (file_fd, directory_fd):
                os.close(fd)
            raise StoreUnavailableError(_lock_failure(lock_path, error)) from None
        return directory_fd, file_fd

    def release(self) -> None:
        """Drop this holder; the OS lock goes when the last holder in the process releases."""
        if self._released:
            return
        self._released = True
        with PathLock._guard:
            (directory_fd, file_fd), count = PathLock._held[self._key]
            if count > 1:
                PathLock._held[self._key] = ((directory_fd, file_fd), count - 1)
                return
            del PathLock._held[self._key]
            os.ftruncate(file_fd, 0)
            for fd in (file_fd, directory_fd):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
