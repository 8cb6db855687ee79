"""Where a memory lives: one setting picks an embedded path, an in-process store or a server.

An embedded path (``PersistentClient``) serves one process at a time: chromadb 1.5.9 silently
loses vectors when two processes write one path, so opening takes an exclusive OS lock
(``affect_memory.memory.chroma.locks``) and a second process is refused with a pointer to server
mode. Several ``ChromaMemory`` objects in one process may share a path (Chroma shares one system
per path inside a process).

A server client's every request is bounded by ``timeout`` seconds (connect, each read and
write, and the wait for a pooled connection). chromadb 1.5.9's ``HttpClient`` has no setting
for it and builds its ``httpx.Client`` with ``timeout=None``, so a stopped or hung server
would block a caller (and a turn's conversation lock) forever: the client is built in a
worker thread that is given up on after ``timeout``, and its session's timeout is set before
it is handed out.

An embedded store keeps the HNSW indexes of recently used collections in an LRU cache that
counts indexes, not bytes (chromadb 1.5.9 ignores ``chroma_segment_cache_policy`` and
``chroma_memory_limit_bytes``): it holds ``RLIMIT_NOFILE // 5`` of them, read once when the
path is first opened in the process. ``index_cache=N`` bounds it by setting the soft open-file
limit to ``5 * N`` (at least the files open + 64, at most the hard limit) for the moment the
client is built, and restoring it at once. Each loaded
index costs about 2.6 MB plus 2.7 KB per memory (384 dimensions, 32 neighbours). A server's
cache is set in the YAML file given to ``chroma run`` (docs/evaluation/performance.md).
"""

from __future__ import annotations

import math
import os
import re
import resource
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from affect_memory.errors import StoreError, StoreUnavailableError
from affect_memory.memory.chroma.locks import PathLock
from affect_memory.redaction import redact_url

__all__ = [
    "DEFAULT_TIMEOUT",
    "IN_MEMORY",
    "MAX_TIMEOUT",
    "MIN_INDEX_CACHE",
    "StoreLocation",
    "check_index_cache",
    "check_timeout",
    "index_cache_size",
    "open_client",
    "parse_location",
]

IN_MEMORY = ":memory:"
"""The location of an in-process store (lost when the last client closes; for tests)."""

DEFAULT_TIMEOUT = 10.0
"""Seconds a Chroma server request may take before ``StoreUnavailableError``.

A 64-row query at 100,000 memories takes about 50 ms and a 512-record write well under a
second, so 10 s only ever trips on a server that is down, stopped or badly overloaded.
"""

MAX_TIMEOUT = 3600.0
"""Longest timeout accepted (an hour); beyond that a hung server is indistinguishable from none."""

MIN_INDEX_CACHE = 8
"""Fewest indexes an embedded cache may be bounded to (the open-file limit is 5 per index)."""

_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]+$")


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed store setting: ``path`` (embedded), ``memory`` (in-process) or ``http``."""

    kind: Literal["path", "memory", "http"]
    path: Path | None = None
    host: str | None = None
    port: int | None = None
    ssl: bool = False

    def describe(self) -> str:
        """The location as a user would type it."""
        if self.kind == "memory":
            return IN_MEMORY
        if self.kind == "http":
            return f"{'https' if self.ssl else 'http'}://{self.host}:{self.port}"
        return str(self.path)


def parse_location(value: str | os.PathLike[str]) -> StoreLocation:
    """Parse ``":memory:"``, ``http(s)://host:port`` or a directory path; refuse anything else.

    A relative path is made absolute here: chromadb keeps one client per path string for the
    life of the process, so ``data`` opened from two working directories would otherwise
    reach the first one's store beside the second one's index.
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise StoreError(f"store location must be a path, ':memory:' or a URL, got {value!r}")
    if value == IN_MEMORY:
        return StoreLocation("memory")
    if "://" not in value:
        return StoreLocation("path", path=Path(value).expanduser().absolute())
    parts = urlsplit(value)
    shown_value = redact_url(value)  # never echo user:password@ or a ?token=
    if parts.scheme not in ("http", "https"):
        raise StoreError(
            f"Chroma server URL must start with http:// or https://, got {shown_value!r} "
            "(e.g. --chroma http://127.0.0.1:8000)"
        )
    try:
        port = parts.port
    except ValueError:
        raise StoreError(f"Chroma server URL has an invalid port: {shown_value!r}") from None
    host = parts.hostname
    if not host or not _HOST.match(host) or parts.path not in ("", "/") or parts.query:
        raise StoreError(
            f"Chroma server URL must be http(s)://HOST:PORT with no path, got {shown_value!r} "
            "(e.g. --chroma http://127.0.0.1:8000)"
        )
    ssl = parts.scheme == "https"
    return StoreLocation("http", host=host, port=port or (443 if ssl else 8000), ssl=ssl)


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def check_timeout(timeout: object) -> float:
    """Seconds in (0, 3600]; a bool, NaN or infinity is refused."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise StoreError(
            f"timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {timeout!r}"
        )
    return float(timeout)


def _http_client(location: StoreLocation, timeout: float) -> Any:
    """A ``chromadb.HttpClient`` whose construction and every later request take <= timeout."""
    import chromadb
    import httpx

    outcome: dict[str, Any] = {}

    def build() -> None:
        try:
            outcome["client"] = chromadb.HttpClient(
                host=location.host or "127.0.0.1",
                port=location.port or 8000,
                ssl=location.ssl,
                settings=_settings(),
            )
        except BaseException as error:  # handed to the caller's thread below
            outcome["error"] = error

    # Daemon: a server that never answers leaves this thread blocked, not the process.
    worker = threading.Thread(target=build, name="affect-memory-chroma-connect", daemon=True)
    worker.start()
    worker.join(timeout)
    hint = f"(start one with `chroma run --host {location.host} --port {location.port} --path DIR`)"
    if worker.is_alive():
        raise StoreUnavailableError(
            f"the Chroma server at {location.describe()} did not answer within {timeout:g} s "
            f"(timeout={timeout:g}); is it stopped or overloaded? {hint}"
        )
    if "error" in outcome:
        raise StoreUnavailableError(
            f"cannot reach a Chroma server at {location.describe()}: {outcome['error']} {hint}"
        ) from None
    client = outcome["client"]
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):  # pragma: no cover - only on another chromadb
        raise StoreError(
            "cannot bound Chroma server requests with a timeout: this chromadb version does "
            "not keep an httpx session at client._server._session (tested with 1.5.9)"
        )
    session.timeout = httpx.Timeout(timeout)
    return client


def check_index_cache(index_cache: object) -> int | None:
    """None (Chroma's own bound) or a whole number of indexes >= ``MIN_INDEX_CACHE``."""
    if index_cache is None:
        return None
    if (
        isinstance(index_cache, bool)
        or not isinstance(index_cache, int)
        or not (MIN_INDEX_CACHE <= index_cache <= 1_000_000)
    ):
        raise StoreError(
            f"index_cache must be a whole number of collections in [{MIN_INDEX_CACHE}, "
            f"1000000], got {index_cache!r}"
        )
    return index_cache


@contextmanager
def _open_file_limit(index_cache: int | None) -> Iterator[None]:
    """While building an embedded client, a soft open-file limit that makes Chroma's index
    cache hold ``index_cache`` indexes (never below what the process has open already)."""
    if index_cache is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:  # pragma: no cover - not Linux
        in_use = 256
    wanted = max(5 * index_cache, in_use + 64)
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def index_cache_size(client: Any) -> int | None:
    """How many HNSW indexes an embedded client's cache holds (None for a server client)."""
    size = getattr(getattr(client, "_server", None), "hnsw_cache_size", None)
    return size if isinstance(size, int) else None


def open_client(
    location: StoreLocation,
    *,
    create: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    index_cache: int | None = None,
) -> tuple[Any, PathLock | None]:
    """A Chroma client for ``location`` and, for an embedded path, the lock now held on it.

    ``timeout`` bounds every request to a server; embedded stores make no network calls.
    ``index_cache`` bounds an embedded store's HNSW index cache, if this is the first client
    of the path (or of ``:memory:``) in the process; a server's is set on the server.
    """
    import chromadb

    timeout = check_timeout(timeout)
    index_cache = check_index_cache(index_cache)
    if location.kind == "memory":
        with _open_file_limit(index_cache):
            return chromadb.EphemeralClient(settings=_settings()), None
    if location.kind == "http":
        return _http_client(location, timeout), None
    directory = location.path
    assert directory is not None
    if not directory.exists():
        if not create:
            raise StoreUnavailableError(
                f"no memory store at {directory} (ingest memories first, or pass --data-dir "
                "or --chroma)"
            )
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreUnavailableError(f"cannot create {directory}: {error}") from None
    elif not directory.is_dir():
        raise StoreUnavailableError(f"store path {directory} exists and is not a directory")
    lock = PathLock(directory)
    try:
        with _open_file_limit(index_cache):
            client = chromadb.PersistentClient(path=str(directory), settings=_settings())
    except Exception as error:
        lock.release()
        raise StoreUnavailableError(
            f"cannot open the embedded store {directory}: {error}"
        ) from None
    return client, lock
