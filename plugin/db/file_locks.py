"""Conversation locks as OS file locks: ``flock`` on one file per conversation in a directory.

The kernel releases a ``flock`` when its owner dies, so a crashed process leaves no stale lock.
Every wait is bounded: ``flock`` itself has no timeout, so a contended lock is waited for in a
thread of its own, abandoned past the timeout (it gives the lock straight back when it gets it).
A lock file removed or replaced while it is held (a clean-up of "stale" locks) excludes nobody
any more, so a waiter locks the file now at the path; the store's commit check catches a turn
that got in beside the holder that way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import hashlib
import os
import threading
from contextlib import suppress
from pathlib import Path
from typing import Literal, overload

from affect_memory.errors import LockTimeoutError
from affect_memory.kernel.errors import StateStoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileLocks", "is_file_at", "release"]


class FileLocks:
    """Exclusive per-conversation file locks in ``directory`` (recreated if it is removed)."""

    def __init__(self, directory: Path, *, hint: str) -> None:
        """Lock files in ``directory``; errors end with ``hint`` (what to check)."""
        self._lock_dir = directory
        self._hint = hint

    def path_for(self, conversation_id: str) -> str:
        """The lock file of a conversation: the SHA-256 of its id."""
        digest = hashlib.sha256(conversation_id.encode("utf-8")).hexdigest()
        return str(self._lock_dir / f"{digest}.lock")

    async def acquire(self, conversation_id: str, *, timeout: float) -> int:
        """An fd holding the conversation's exclusive flock; waits in a thread, not the loop.

        Past ``timeout`` seconds :class:`LockTimeoutError` names the conversation; the waiter
        thread left behind gives the lock straight back when it gets it.
        """
        path = self.path_for(conversation_id)
        fd = self.lock(path, wait=False)
        if fd is not None:
            return fd
        # Held elsewhere: wait in a thread of our own. A shared pool could fill with waiters
        # of one busy conversation and starve another conversation's turn.
        done = self._waiter(path)
        try:
            async with asyncio.timeout(timeout):
                try:
                    return await asyncio.wrap_future(done)
                except asyncio.CancelledError:
                    _give_back(done)
                    raise
        except TimeoutError:
            raise LockTimeoutError(
                conversation_id, timeout, "another turn (in this or another process) holds it"
            ) from None

    def hold(self, path: str, *, timeout: float, what: str) -> int:
        """An fd holding the flock at ``path``, waiting at most ``timeout`` seconds (blocking).

        Past it a ``StateStoreError`` says that ``what`` stayed held and for how long.
        """
        fd = self.lock(path, wait=False)
        if fd is not None:
            return fd
        done = self._waiter(path)
        try:
            return done.result(timeout)
        except concurrent.futures.TimeoutError:
            _give_back(done)
            raise StateStoreError(
                f"gave up waiting for {what} after {timeout:g} s: another process holds it "
                f"({path}; a process stopped in the middle of a commit?)"
            ) from None

    def _waiter(self, path: str) -> concurrent.futures.Future[int]:
        """A thread blocking on the flock at ``path``: the fd, or given back if nobody waits."""
        done: concurrent.futures.Future[int] = concurrent.futures.Future()

        def wait() -> None:
            try:
                locked = self.lock(path, wait=True)
            except BaseException as error:
                if done.set_running_or_notify_cancel():
                    done.set_exception(error)
                return
            if done.set_running_or_notify_cancel():
                done.set_result(locked)
            else:  # the waiter gave up while we blocked
                release(locked)

        threading.Thread(target=wait, name="affect-memory-lock", daemon=True).start()
        return done

    @overload
    def lock(self, path: str, *, wait: Literal[True]) -> int: ...
    @overload
    def lock(self, path: str, *, wait: Literal[False]) -> int | None: ...
    def lock(self, path: str, *, wait: bool) -> int | None:
        """An fd holding an exclusive flock on the file now at ``path``; None if busy, not waiting.

        A lock file removed or replaced while we waited on it (a clean-up of "stale" locks)
        excludes nobody any more, so the lock is taken again on the file now at the path.
        """
        while True:
            fd = self._open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if not wait and error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return None
                raise StateStoreError(f"cannot lock {path}: {error}") from error
            if is_file_at(fd, path):
                return fd
            release(fd)

    def _open(self, path: str) -> int:
        """Open (creating) a lock file, and the lock directory again if it was removed."""
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StateStoreError(
                f"cannot open the lock file {path}: {error}; {self._hint}"
            ) from error
        try:
            self._lock_dir.mkdir(exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise StateStoreError(
                f"cannot open the lock file {path}: {error}; {self._hint}"
            ) from error


def _give_back(done: concurrent.futures.Future[int]) -> None:
    """Nobody waits for ``done`` any more: release the lock it holds or is about to hand over."""
    if not done.cancel():
        done.add_done_callback(
            lambda future: release(future.result()) if future.exception() is None else None
        )


def is_file_at(fd: int, path: str) -> bool:
    """Whether ``fd`` is still the file at ``path``: not removed or replaced since it was opened."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def release(fd: int) -> None:
    """Unlock and close a lock file descriptor (errors are moot: closing releases it)."""
    with suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    with suppress(OSError):
        os.close(fd)
