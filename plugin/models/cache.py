"""The per-user cache directory: derived files (ONNX graphs, exemplar vectors) and their writes.

Everything here can be rebuilt from the installed model, so a cache that cannot be written only
costs time: writers report failure instead of raising. A write goes to a temporary file in the
target directory and is renamed over the target, so a reader sees no file or a whole one, and
processes that fill the cache at once each leave a complete file (the last rename wins).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "file_sha256", "write_atomically"]

CACHE_ENV = "AFFECT_MEMORY_CACHE"
"""Environment variable naming the cache directory."""

STALE_TEMP_SECONDS = 3600.0
"""A temporary file older than this was left by a killed writer and is removed."""


def cache_dir() -> Path:
    """``$AFFECT_MEMORY_CACHE``, else ``$XDG_CACHE_HOME/affect-memory``, else ``~/.cache/…``."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "affect-memory"


def write_atomically(target: Path, payload: bytes) -> OSError | None:
    """Write ``payload`` to ``target`` through a temporary file and a rename; None on success.

    The file is fsynced before the rename, so a crash cannot leave a short file under the final
    name. It is made readable by everyone (mkstemp's 0600 would hide it in a shared cache).
    """
    temporary: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(target)
        handle, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o644)
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except OSError as error:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return error
    return None


def _remove_stale_temporaries(target: Path) -> None:
    cutoff = time.time() - STALE_TEMP_SECONDS
    for leftover in target.parent.glob(f".{target.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def file_sha256(path: Path) -> str:
    """The sha256 of a file, remembered in the cache by (real path, size, mtime).

    Hashing the 90 MB of weights takes 0.1-0.2 s, too much for every start; a file that changes
    changes its size or mtime, so it is hashed again rather than served a stale digest.
    """
    status = path.stat()
    stamp = f"{os.path.realpath(path)}\0{status.st_size}\0{status.st_mtime_ns}"
    memo = cache_dir() / "digests" / f"{hashlib.sha256(stamp.encode()).hexdigest()[:32]}.json"
    try:
        recorded = json.loads(memo.read_text(encoding="utf-8"))
        if isinstance(recorded, dict) and recorded.get("stamp") == stamp:
            return str(recorded["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    value = digest.hexdigest()
    write_atomically(memo, json.dumps({"stamp": stamp, "sha256": value}).encode())
    return value
