"""The embedded state store: one SQLite file shared safely by threads and OS processes.

A conversation is held for the length of a turn by an OS file lock
(``flock`` on ``<db>.locks/<sha256(conversation id)>.lock``), which the kernel releases when
its owner dies, so no stale lock outlives a crashed process. SQLite itself is only ever
held for short transactions: one read at load, one ``BEGIN IMMEDIATE`` write at commit
holding the new state, every message of the turn and its outbox rows. Different
conversations therefore never wait on each other for longer than a commit.

Removing a lock file while it is held (a clean-up of "stale" locks) lets the next turn in
beside the holder; no update is lost even then. A waiter whose file was removed or replaced
locks the file now at the path, and a commit is refused, with nothing written, when the
conversation changed since the transaction first read it.

An outbox item that can never apply is quarantined (``quarantine_outbox``, or on the spot when
its row cannot be read back): set aside with its reason, listed by ``quarantined_outbox``,
never pending again until ``requeue_outbox``. A file of an older schema is upgraded on open.

Durability: WAL mode with ``synchronous=NORMAL``. A committed turn survives the process
being killed at any point; after a power loss or OS crash the last few commits may be
rolled back (never half-applied). Pass ``synchronous="FULL"`` to trade speed for that.
Single host only: file locks and WAL need every process on one machine and a local disk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import hashlib
import json
import logging
import os
import queue
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from pydantic import ValidationError

from kernel.adapters.store_support import holding, prepare_commit
from kernel.bounds import check_conversation_id, check_limit
from kernel.errors import CorruptStateError, InvalidInputError, StateStoreError, shown
from kernel.models import AffectState
from kernel.protocols import Message, OutboxItem

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MAX_PAYLOAD_DEPTH",
    "SCHEMA_VERSION",
    "STATE_FORMAT_VERSION",
    "QuarantinedOutboxItem",
    "SQLiteStateStore",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of the tables this module writes; older files are upgraded on open."""

MAX_PAYLOAD_DEPTH = 100
"""Deepest nesting of lists and objects an outbox payload may have; deeper is refused."""

STATE_FORMAT_VERSION = 1
"""Version of the ``{"version": ..., "state": ...}`` JSON envelope a state row holds."""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS conversations (
    conversation_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    timestamp TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, seq);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    applied INTEGER NOT NULL DEFAULT 0 CHECK (applied IN (0, 1))
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (topic, applied, seq);
"""

_UPGRADES: dict[int, tuple[str, ...]] = {
    # 1 -> 2: an outbox item that can never apply is set aside with its reason, not retried.
    1: (
        "ALTER TABLE outbox ADD COLUMN quarantine_reason TEXT",
        "ALTER TABLE outbox ADD COLUMN quarantined_at TEXT",
    ),
}
"""The statements that take a file from each schema version to the next."""

_REASON_CHARS = 1000
"""A quarantine reason longer than this is cut."""

_SEEN = (
    "SELECT (SELECT state FROM conversations WHERE conversation_id = ?1), "
    "(SELECT max(seq) FROM messages WHERE conversation_id = ?1)"
)
"""What a transaction's reads depend on: the state row and the newest message of a conversation."""

_Seen = tuple[str | None, int | None]

_T = TypeVar("_T")
_CACHED_CONVERSATIONS = 64
"""Conversations whose last read state and transcript window a store keeps in memory."""
_CACHED_CHARS = 262_144
"""A transcript window longer than this (in characters) is not kept in memory."""


@dataclass(frozen=True)
class _Cached:
    """What this store last read of a conversation: rows are append-only, so only newer
    rows (``seq > last_seq``) need reading again."""

    state_text: str | None = None
    state: AffectState | None = None
    messages: tuple[Message, ...] | None = None
    last_seq: int = 0
    complete: bool = False
    """``messages`` holds every message of the conversation."""


@dataclass(frozen=True)
class QuarantinedOutboxItem:
    """An outbox item set aside because it can never apply; it is never retried on its own."""

    id: str
    topic: str
    conversation_id: str
    reason: str
    quarantined_at: str
    payload: str
    """The stored payload text as it is; it may not be JSON."""


_HINT = "check that the file is a local SQLite database and the disk is writable"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SQLiteStateStore:
    """A ``StateStore`` in one SQLite file; safe across engines, threads and processes.

    Use one instance per process (or per thread); instances on the same file cooperate.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        """Open (creating if needed) the database at ``path`` and its lock directory."""
        if fcntl is None:  # pragma: no cover - Windows
            raise StateStoreError("SQLiteStateStore needs POSIX file locks (fcntl)")
        text = os.fspath(path)
        if not isinstance(text, str) or not text or text == ":memory:" or text.startswith("file:"):
            raise InvalidInputError(f"path must be a database file path, got {path!r}")
        if synchronous not in ("NORMAL", "FULL"):
            raise InvalidInputError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float):
            raise InvalidInputError(f"busy_timeout must be seconds, got {busy_timeout!r}")
        if not busy_timeout > 0:
            raise InvalidInputError(f"busy_timeout must be positive, got {busy_timeout!r}")
        self._path = Path(text)
        self._lock_dir = self._path.with_name(self._path.name + ".locks")
        self._write_lock = str(self._lock_dir / "write.lock")
        self._backing = f"sqlite:{self._path.resolve()}"
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_guard = threading.Lock()
        self._busy_timeout = float(busy_timeout)
        self._synchronous = synchronous
        self._clock = clock
        self._pool: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all: list[sqlite3.Connection] = []
        self._all_guard = threading.Lock()
        self._closed = False
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(8, (os.cpu_count() or 1) + 4),
            thread_name_prefix="affect-memory-sqlite",
        )
        try:
            self._lock_dir.mkdir(parents=False, exist_ok=True)
        except OSError as error:
            raise StateStoreError(
                f"cannot create the lock directory {self._lock_dir}: {error}; {_HINT}"
            ) from error
        with self._connection() as connection:
            self._migrate(connection)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def close(self) -> None:
        """Close every pooled connection; the store cannot be used afterwards."""
        self._closed = True
        self._executor.shutdown(wait=True)
        with self._all_guard:
            connections, self._all = self._all, []
        for connection in connections:
            with suppress(sqlite3.Error):
                connection.close()

    async def __aenter__(self) -> SQLiteStateStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- StateStore ---------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, conversation_id: str) -> AsyncIterator[_SQLiteTransaction]:
        """Hold ``conversation_id`` exclusively (across processes) until the block exits."""
        check_conversation_id(conversation_id)
        self._check_open()
        with holding(self._backing, conversation_id):
            fd = await self._acquire(conversation_id)
            transaction = _SQLiteTransaction(self, conversation_id)
            try:
                yield transaction
            finally:
                transaction.closed = True
                _release_when_done(fd, transaction.in_flight)

    async def pending_outbox(self, topic: str, limit: int = 1000) -> tuple[OutboxItem, ...]:
        """Outbox items of ``topic`` not yet applied nor quarantined, oldest first.

        A row that cannot be read back (not JSON, nested too deeply, not an item) is
        quarantined on the spot and named in a warning, so it cannot block the items after it.
        """
        if not isinstance(topic, str):
            raise InvalidInputError(f"topic must be a string, got {shown(topic)}")
        check_limit(limit, minimum=1)
        while True:
            rows = await self._run(
                lambda c: c.execute(
                    "SELECT seq, id, topic, payload, conversation_id FROM outbox "
                    "WHERE topic = ? AND applied = 0 AND quarantine_reason IS NULL "
                    "ORDER BY seq LIMIT ?",
                    (topic, limit),
                ).fetchall()
            )
            items: list[OutboxItem] = []
            unreadable: list[tuple[int, str, str, str]] = []
            for seq, item_id, item_topic, payload, conversation_id in rows:
                try:
                    items.append(_decode_item(item_id, item_topic, payload))
                except CorruptStateError as error:
                    unreadable.append((seq, item_id, conversation_id, str(error)))
            if not unreadable:
                return tuple(items)
            await self._set_aside(unreadable)

    async def quarantine_outbox(self, item_id: str, reason: str) -> bool:
        """Set a pending item aside with ``reason``: never pending again unless requeued.

        Returns False when no pending item has that id (unknown, applied or already aside).
        """
        if not isinstance(item_id, str) or not item_id:
            raise InvalidInputError(f"item_id must be a non-empty string, got {shown(item_id)}")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInputError(f"reason must be a non-blank string, got {shown(reason)}")
        stamp = self._clock().astimezone(UTC).isoformat()

        def mark(connection: sqlite3.Connection) -> bool:
            with self._write(connection):
                cursor = connection.execute(
                    "UPDATE outbox SET quarantine_reason = ?, quarantined_at = ? "
                    "WHERE id = ? AND applied = 0 AND quarantine_reason IS NULL",
                    (reason[:_REASON_CHARS], stamp, item_id),
                )
                return cursor.rowcount == 1

        return await self._run(mark)

    async def quarantined_outbox(
        self, topic: str | None = None, limit: int = 1000
    ) -> tuple[QuarantinedOutboxItem, ...]:
        """Items set aside and not requeued, of ``topic`` (else every topic), oldest first."""
        if topic is not None and not isinstance(topic, str):
            raise InvalidInputError(f"topic must be a string or None, got {shown(topic)}")
        check_limit(limit, minimum=1)
        rows = await self._run(
            lambda c: c.execute(
                "SELECT id, topic, conversation_id, quarantine_reason, quarantined_at, payload "
                "FROM outbox WHERE applied = 0 AND quarantine_reason IS NOT NULL "
                "AND (?1 IS NULL OR topic = ?1) ORDER BY seq LIMIT ?2",
                (topic, limit),
            ).fetchall()
        )
        return tuple(
            QuarantinedOutboxItem(
                id=str(item_id),
                topic=str(item_topic),
                conversation_id=str(conversation_id),
                reason=str(reason),
                quarantined_at=str(stamp),
                payload=payload if isinstance(payload, str) else repr(payload),
            )
            for item_id, item_topic, conversation_id, reason, stamp, payload in rows
        )

    async def requeue_outbox(self, ids: Sequence[str]) -> int:
        """Make quarantined items pending again (once what poisoned them is fixed); how many."""
        wanted = [(item_id,) for item_id in _check_ids(ids)]
        if not wanted:
            return 0

        def release(connection: sqlite3.Connection) -> int:
            with self._write(connection):
                return connection.executemany(
                    "UPDATE outbox SET quarantine_reason = NULL, quarantined_at = NULL "
                    "WHERE id = ? AND applied = 0 AND quarantine_reason IS NOT NULL",
                    wanted,
                ).rowcount

        return await self._run(release)

    async def complete_outbox(self, ids: Sequence[str]) -> None:
        """Mark items applied; unknown ids are ignored."""
        wanted = [(item_id,) for item_id in _check_ids(ids)]
        if not wanted:
            return

        def mark(connection: sqlite3.Connection) -> None:
            with self._write(connection):
                connection.executemany("UPDATE outbox SET applied = 1 WHERE id = ?", wanted)

        await self._run(mark)

    # -- internals ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StateStoreError(f"the store on {self._path} is closed")

    async def _set_aside(self, unreadable: Sequence[tuple[int, str, str, str]]) -> None:
        """Quarantine outbox rows that cannot be read, by seq, and name each in a warning."""
        stamp = self._clock().astimezone(UTC).isoformat()
        marks = [(reason[:_REASON_CHARS], stamp, seq) for seq, _, _, reason in unreadable]

        def mark(connection: sqlite3.Connection) -> None:
            with self._write(connection):
                connection.executemany(
                    "UPDATE outbox SET quarantine_reason = ?, quarantined_at = ? "
                    "WHERE seq = ? AND applied = 0 AND quarantine_reason IS NULL",
                    marks,
                )

        await self._run(mark)
        for _, item_id, conversation_id, reason in unreadable:
            logger.warning(
                "outbox item %s of conversation %s in %s is quarantined and will not be "
                "retried on its own: %s",
                shown(item_id),
                shown(conversation_id),
                self._path,
                reason,
            )

    def _lock_path(self, conversation_id: str) -> str:
        digest = hashlib.sha256(conversation_id.encode("utf-8")).hexdigest()
        return str(self._lock_dir / f"{digest}.lock")

    async def _acquire(self, conversation_id: str) -> int:
        """An fd holding the conversation's exclusive flock; waits in a thread, not the loop."""
        path = self._lock_path(conversation_id)
        fd = self._lock(path, wait=False)
        if fd is not None:
            return fd
        # Held elsewhere: wait in a thread of our own. A shared pool could fill with waiters
        # of one busy conversation and starve another conversation's turn.
        done: concurrent.futures.Future[int] = concurrent.futures.Future()

        def wait() -> None:
            try:
                locked = self._lock(path, wait=True)
            except BaseException as error:
                if done.set_running_or_notify_cancel():
                    done.set_exception(error)
                return
            if done.set_running_or_notify_cancel():
                done.set_result(locked)
            else:  # the waiter gave up while we blocked
                _release(locked)

        threading.Thread(target=wait, name="affect-memory-lock", daemon=True).start()
        try:
            return await asyncio.wrap_future(done)
        except asyncio.CancelledError:
            if not done.cancelled():
                # The thread already holds (or is about to hand over) the lock: give it back.
                done.add_done_callback(
                    lambda future: _release(future.result()) if future.exception() is None else None
                )
            raise

    @overload
    def _lock(self, path: str, *, wait: Literal[True]) -> int: ...
    @overload
    def _lock(self, path: str, *, wait: Literal[False]) -> int | None: ...
    def _lock(self, path: str, *, wait: bool) -> int | None:
        """An fd holding an exclusive flock on the file now at ``path``; None if busy, not waiting.

        A lock file removed or replaced while we waited on it (a clean-up of "stale" locks)
        excludes nobody any more, so the lock is taken again on the file now at the path.
        """
        while True:
            fd = self._open_lock_file(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if not wait and error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return None
                raise StateStoreError(f"cannot lock {path}: {error}") from error
            if _is_file_at(fd, path):
                return fd
            _release(fd)

    def _open_lock_file(self, path: str) -> int:
        """Open (creating) a lock file, and the lock directory again if it was removed."""
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StateStoreError(f"cannot open the lock file {path}: {error}; {_HINT}") from error
        try:
            self._lock_dir.mkdir(exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise StateStoreError(f"cannot open the lock file {path}: {error}; {_HINT}") from error

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            connection.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as error:
            raise StateStoreError(f"cannot open {self._path}: {error}; {_HINT}") from error
        with self._all_guard:
            self._all.append(connection)
        return connection

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A pooled connection for one call, used by one thread at a time."""
        try:
            connection = self._pool.get_nowait()
        except queue.Empty:
            connection = self._connect()
        try:
            yield connection
        finally:
            if self._closed:
                with suppress(sqlite3.Error):
                    connection.close()
            else:
                self._pool.put(connection)

    def _call(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._connection() as connection:
            try:
                return work(connection)
            except sqlite3.Error as error:
                raise StateStoreError(f"SQLite error on {self._path}: {error}; {_HINT}") from error

    def _submit(self, work: Callable[[sqlite3.Connection], _T]) -> concurrent.futures.Future[_T]:
        """Run ``work`` on a pooled connection in the store's worker threads."""
        self._check_open()
        try:
            return self._executor.submit(self._call, work)
        except RuntimeError as error:  # shut down concurrently
            raise StateStoreError(f"the store on {self._path} is closed") from error

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.wrap_future(self._submit(work))

    @contextmanager
    def _write(self, connection: sqlite3.Connection) -> Iterator[None]:
        """A short ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back otherwise.

        Writers of this store queue on an OS lock first: SQLite's own busy handler polls with
        sleeps of a millisecond or more, a kernel lock wakes the next writer at once.
        """
        fd = self._lock(self._write_lock, wait=True)
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            os.close(fd)  # closing the only descriptor releases the lock

    def _migrate(self, connection: sqlite3.Connection) -> None:
        """Create the tables of a new file, or upgrade an older file's, in one transaction."""
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if 0 <= version < SCHEMA_VERSION:
                with self._write(connection):
                    # Read again under the write lock: another process may have upgraded it.
                    version = connection.execute("PRAGMA user_version").fetchone()[0]
                    if version == 0:
                        for statement in _SCHEMA_V1.split(";"):
                            if statement.strip():
                                connection.execute(statement)
                        version = 1
                    while 0 < version < SCHEMA_VERSION:
                        for statement in _UPGRADES[version]:
                            connection.execute(statement)
                        version += 1
                    connection.execute(f"PRAGMA user_version = {int(version)}")
        except sqlite3.DatabaseError as error:
            raise StateStoreError(
                f"{self._path} is not a usable SQLite database: {error}; {_HINT}"
            ) from error
        if version != SCHEMA_VERSION:
            raise StateStoreError(
                f"{self._path} has schema version {version}; this affect-memory reads version "
                f"{SCHEMA_VERSION} (upgrade affect-memory, or point it at another file)"
            )

    def _read_state(
        self, connection: sqlite3.Connection, conversation_id: str
    ) -> AffectState | None:
        row = connection.execute(
            "SELECT state FROM conversations WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()
        return self._state_of(conversation_id, None if row is None else row[0])

    def _state_of(self, conversation_id: str, text: str | None) -> AffectState | None:
        """The state a stored row holds, decoded once per distinct row text."""
        if text is None:
            return None
        cached = self._cached(conversation_id)
        if cached.state_text == text and cached.state is not None:
            return cached.state
        state = _decode_state(conversation_id, text)
        self._remember(conversation_id, state_text=text, state=state)
        return state

    def _read_transcript(
        self, connection: sqlite3.Connection, conversation_id: str, limit: int | None
    ) -> tuple[Message, ...]:
        if limit is None:
            rows = connection.execute(
                "SELECT seq, role, content, timestamp FROM messages "
                "WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            ).fetchall()
            return _decode_messages(conversation_id, rows)
        cached = self._cached(conversation_id)
        usable = cached.messages is not None and (cached.complete or len(cached.messages) >= limit)
        after = cached.last_seq if usable else 0
        rows = connection.execute(
            "SELECT seq, role, content, timestamp FROM messages "
            "WHERE conversation_id = ? AND seq > ? ORDER BY seq DESC LIMIT ?",
            (conversation_id, after, limit),
        ).fetchall()
        rows.reverse()
        fresh = _decode_messages(conversation_id, rows)
        if usable and len(rows) < limit:
            assert cached.messages is not None
            window = cached.messages + fresh
            complete = cached.complete
        else:  # nothing usable cached, or the new rows alone fill the window
            window = fresh
            complete = not usable and len(rows) < limit
        if len(window) > limit:
            window, complete = window[-limit:], False
        last_seq = rows[-1][0] if rows else after
        if sum(len(message.content) for message in window) <= _CACHED_CHARS:
            self._remember(conversation_id, messages=window, last_seq=last_seq, complete=complete)
        else:
            self._remember(conversation_id, messages=None, last_seq=0, complete=False)
        return window

    def _cached(self, conversation_id: str) -> _Cached:
        with self._cache_guard:
            return self._cache.get(conversation_id) or _Cached()

    def _remember(self, conversation_id: str, **changes: Any) -> None:
        with self._cache_guard:
            entry = self._cache.pop(conversation_id, None) or _Cached()
            self._cache[conversation_id] = replace(entry, **changes)
            while len(self._cache) > _CACHED_CONVERSATIONS:
                self._cache.popitem(last=False)

    def _commit_work(
        self,
        conversation_id: str,
        state: object,
        messages: object,
        outbox: object,
        seen: _Seen | None = None,
    ) -> Callable[[sqlite3.Connection], None]:
        """Check and serialize a commit here; the returned work only writes.

        With ``seen`` (what the transaction read), the write is refused if the conversation
        changed since: only a turn that got past a removed lock file can have changed it, and
        writing over its commit would lose that turn.
        """
        now = self._clock()
        prepared = prepare_commit(state, messages, outbox, now)
        state_json = (
            None
            if prepared.state is None
            else f'{{"version":{STATE_FORMAT_VERSION},"state":{prepared.state.model_dump_json()}}}'
        )
        message_rows = [
            (conversation_id, message.role, message.content, message.timestamp)
            for message in prepared.messages
        ]
        outbox_rows = []
        for index, item in enumerate(prepared.outbox):
            if _nested_deeper_than(item.payload, MAX_PAYLOAD_DEPTH):
                raise InvalidInputError(
                    f"outbox[{index}] ({shown(item.id)}) payload is nested more than "
                    f"{MAX_PAYLOAD_DEPTH} levels deep, too deep to read back"
                )
            try:
                payload = json.dumps(item.payload, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as error:
                raise InvalidInputError(
                    f"outbox[{index}] ({shown(item.id)}) payload is not JSON-serializable: {error}"
                ) from None
            outbox_rows.append((item.id, item.topic, payload, conversation_id))
        stamp = now.astimezone(UTC).isoformat()

        def write(connection: sqlite3.Connection) -> None:
            with self._write(connection):
                if (
                    seen is not None
                    and connection.execute(_SEEN, (conversation_id,)).fetchone() != seen
                ):
                    raise StateStoreError(
                        f"conversation {conversation_id!r} changed while this transaction held "
                        "it, so committing would overwrite another turn; nothing was written "
                        "(retry the turn). Another process got in, most likely because a lock "
                        f"file in {self._lock_dir} was removed while it was held"
                    )
                if state_json is not None:
                    connection.execute(
                        "INSERT INTO conversations (conversation_id, state, updated_at) "
                        "VALUES (?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
                        "state = excluded.state, updated_at = excluded.updated_at",
                        (conversation_id, state_json, stamp),
                    )
                if message_rows:
                    connection.executemany(
                        "INSERT INTO messages (conversation_id, role, content, timestamp) "
                        "VALUES (?, ?, ?, ?)",
                        message_rows,
                    )
                if outbox_rows:
                    connection.executemany(
                        "INSERT OR IGNORE INTO outbox (id, topic, payload, conversation_id) "
                        "VALUES (?, ?, ?, ?)",
                        outbox_rows,
                    )

        return write


def _release_when_done(fd: int, work: Sequence[concurrent.futures.Future[Any]]) -> None:
    """Release the lock now, or once the last unfinished worker call of the holder ends."""
    pending = [future for future in work if not future.done()]
    if not pending:
        _release(fd)
        return
    remaining = [len(pending)]
    guard = threading.Lock()

    def finished(_: concurrent.futures.Future[Any]) -> None:
        with guard:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            _release(fd)

    for future in pending:
        future.add_done_callback(finished)


def _is_file_at(fd: int, path: str) -> bool:
    """Whether ``fd`` is still the file at ``path``: not removed or replaced since it was opened."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _release(fd: int) -> None:
    with suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    with suppress(OSError):
        os.close(fd)


def _decode_messages(
    conversation_id: str, rows: Sequence[tuple[int, str, str, str]]
) -> tuple[Message, ...]:
    """Validate message rows; any problem names the message and the conversation."""
    messages: list[Message] = []
    for seq, role, content, timestamp in rows:
        try:
            messages.append(
                Message.model_validate({"role": role, "content": content, "timestamp": timestamp})
            )
        except ValidationError as error:
            raise CorruptStateError(
                f"message {seq} of conversation {conversation_id!r} cannot be read: {error}"
            ) from error
    return tuple(messages)


def _check_ids(ids: object) -> list[str]:
    """The outbox ids of a sequence, each a string."""
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise InvalidInputError(f"ids must be a sequence of ids, got {shown(ids)}")
    for item_id in ids:
        if not isinstance(item_id, str):
            raise InvalidInputError(f"outbox ids must be strings, got {shown(item_id)}")
    return list(ids)


def _nested_deeper_than(value: object, limit: int) -> bool:
    """Whether lists and dicts nest more than ``limit`` levels in ``value`` (no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[object]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _decode_item(item_id: object, topic: object, payload: object) -> OutboxItem:
    """Read one outbox row back; a problem raises ``CorruptStateError`` saying what it is."""
    try:
        decoded: Any = json.loads(payload)  # type: ignore[arg-type]
    except RecursionError:
        raise CorruptStateError("its payload is nested too deeply to read") from None
    except TypeError:
        raise CorruptStateError(f"its payload is not text but {type(payload).__name__}") from None
    except ValueError as error:
        raise CorruptStateError(f"its payload is not valid JSON: {error}") from None
    if not isinstance(decoded, dict):
        raise CorruptStateError(f"its payload is not a JSON object but {shown(decoded)}")
    try:
        return OutboxItem(id=item_id, topic=topic, payload=decoded)  # type: ignore[arg-type]
    except ValidationError as error:
        raise CorruptStateError(f"it is not a valid outbox item: {error}") from None


def _decode_state(conversation_id: str, text: str) -> AffectState:
    """Validate a stored state envelope; any problem names the conversation."""
    try:
        envelope: Any = json.loads(text)
    except RecursionError:
        raise CorruptStateError(
            f"stored state of conversation {conversation_id!r} is nested too deeply to read"
        ) from None
    except TypeError:
        raise CorruptStateError(
            f"stored state of conversation {conversation_id!r} is not text but "
            f"{type(text).__name__}"
        ) from None
    except ValueError as error:
        raise CorruptStateError(
            f"stored state of conversation {conversation_id!r} is not valid JSON: {error}"
        ) from error
    if not isinstance(envelope, dict) or set(envelope) != {"version", "state"}:
        raise CorruptStateError(
            f"stored state of conversation {conversation_id!r} is not a "
            '{"version": ..., "state": ...} envelope'
        )
    if envelope["version"] != STATE_FORMAT_VERSION:
        raise CorruptStateError(
            f"stored state of conversation {conversation_id!r} has format version "
            f"{envelope['version']!r}; this affect-memory reads version {STATE_FORMAT_VERSION}"
        )
    try:
        return AffectState.model_validate(envelope["state"])
    except ValidationError as error:
        raise CorruptStateError(
            f"stored state of conversation {conversation_id!r} failed validation: {error}"
        ) from error


class _SQLiteTransaction:
    """One held conversation of a ``SQLiteStateStore``."""

    def __init__(self, store: SQLiteStateStore, conversation_id: str) -> None:
        self._store = store
        self._conversation_id = conversation_id
        self.committed = False
        self.closed = False
        self.in_flight: list[concurrent.futures.Future[Any]] = []
        """Worker-thread calls of this transaction; the lock is kept until they finish."""
        self._seen: _Seen | None = None
        self._seen_guard = threading.Lock()

    def _see(self, connection: sqlite3.Connection) -> _Seen | None:
        """Note what the conversation holds before this transaction's first read.

        Returns the row when this call took it (so a state read can reuse it), else None.
        Taken before the read, so a change between the two shows as a conflict at commit.
        """
        with self._seen_guard:
            if self._seen is not None:
                return None
            self._seen = connection.execute(_SEEN, (self._conversation_id,)).fetchone()
            return self._seen

    def _check_open(self) -> None:
        if self.closed:
            raise StateStoreError(
                f"transaction on conversation {self._conversation_id!r} is already closed"
            )

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        future = self._store._submit(work)
        self.in_flight.append(future)
        return await asyncio.wrap_future(future)

    async def load_state(self) -> AffectState | None:
        """The committed state, or None for a new conversation."""
        self._check_open()

        def read(connection: sqlite3.Connection) -> AffectState | None:
            seen = self._see(connection)
            if seen is not None:
                return self._store._state_of(self._conversation_id, seen[0])
            return self._store._read_state(connection, self._conversation_id)

        return await self._run(read)

    async def load_transcript(self, limit: int | None = None) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        self._check_open()
        if limit is not None:
            check_limit(limit, minimum=1)

        def read(connection: sqlite3.Connection) -> tuple[Message, ...]:
            self._see(connection)
            return self._store._read_transcript(connection, self._conversation_id, limit)

        return await self._run(read)

    async def commit(
        self,
        *,
        state: AffectState | None,
        messages: Sequence[Message],
        outbox: Sequence[OutboxItem] = (),
    ) -> None:
        """Write state (None keeps the old), messages and outbox in one SQLite transaction.

        If the caller is cancelled mid-commit, the write still finishes (or rolls back)
        before the conversation's lock is released.
        """
        self._check_open()
        if self.committed:
            raise StateStoreError(
                f"transaction on conversation {self._conversation_id!r} was already committed"
            )
        work = self._store._commit_work(self._conversation_id, state, messages, outbox, self._seen)
        self.committed = True
        try:
            await self._run(work)
        except BaseException:
            future = self.in_flight[-1]
            if future.done() and not future.cancelled() and future.exception() is not None:
                self.committed = False  # nothing was written; a retry is allowed
            raise
