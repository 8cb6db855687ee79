"""The embedded state store: one SQLite file shared safely by threads and OS processes.

A conversation is held for the length of a turn by an OS file lock
(``flock`` on ``<db>.locks/<sha256(conversation id)>.lock``), which the kernel releases when
its owner dies, so no stale lock outlives a crashed process. SQLite itself is only ever
held for short transactions: a few autocommit reads at load (state, transcript and what the
commit checks), one ``BEGIN IMMEDIATE`` write at commit
holding the new state, every message of the turn, its outbox rows and its history row (the
mood after it, ``affect_memory.state.turn_history``). Different
conversations therefore never wait on each other for longer than a commit.

Waiting is bounded: a turn waits at most ``lock_timeout`` seconds for its conversation
(then ``LockTimeoutError`` names it), a commit at most ``busy_timeout`` for the OS write lock,
then at most ``busy_timeout`` again for SQLite's.

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

Locks, connections, the read cache and the schema are modules of their own.

The module is about 580 lines because the store and its transaction share private state (what a
transaction first read, checked again at commit, and the store's read cache) and the file-lock
and short-transaction rules above; split, a method could be read without the rule it depends on.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Literal, TypeVar

from affect_memory.db.file_locks import FileLocks, release
from affect_memory.db.sqlite_connections import SQLiteConnections
from affect_memory.kernel.adapters.store_support import check_outbox_ids, holding, prepare_commit
from affect_memory.kernel.bounds import check_conversation_id, check_limit
from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.errors import CorruptStateError, InvalidInputError, StateStoreError, shown
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import Message, OutboxItem
from affect_memory.state.common import (
    ClosingStore,
    WorkerTransaction,
    check_topic,
    decode_item,
    encode_payload,
    encode_state,
    when_done,
)
from affect_memory.state.sqlite_history import (
    add_turn_affect,
    claim,
    list_conversations,
    read_turns,
)
from affect_memory.state.sqlite_reads import ReadCache
from affect_memory.state.sqlite_schema import SCHEMA_VERSION, migrate
from affect_memory.state.turn_history import (
    ConversationSummary,
    ConversationTurn,
    turn_affect_rows,
)
from affect_memory.state.user_links import (
    StateErasure,
    check_user_id,
    outbox_naming,
    payload_users,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "SCHEMA_VERSION",
    "QuarantinedOutboxItem",
    "SQLiteStateStore",
]

logger = logging.getLogger(__name__)

_REASON_CHARS = 1000
"""A quarantine reason longer than this is cut."""

_SEEN = (
    "SELECT (SELECT state FROM conversations WHERE conversation_id = ?1), "
    "(SELECT max(seq) FROM messages WHERE conversation_id = ?1)"
)
"""What a transaction's reads depend on: the state row and the newest message of a conversation."""

_Seen = tuple[str | None, int | None]

_LINK = "INSERT OR IGNORE INTO conversation_users (conversation_id, user_id) VALUES (?, ?)"
"""Link a conversation to a user (``affect_memory.state.user_links``)."""

_T = TypeVar("_T")


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


class SQLiteStateStore(ClosingStore):
    """A ``StateStore`` in one SQLite file; safe across engines, threads and processes.

    Use one instance per process (or per thread); instances on the same file cooperate.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = 30.0,
        busy_timeout: float = 30.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        clock: Clock = utc_now,
    ) -> None:
        """Open (creating if needed) the database at ``path`` and its lock directory.

        ``lock_timeout`` bounds a turn's wait for its conversation (then ``LockTimeoutError``),
        ``busy_timeout`` a commit's wait for the database's write lock.
        """
        if fcntl is None:  # pragma: no cover - Windows
            raise StateStoreError("SQLiteStateStore needs POSIX file locks (fcntl)")
        text = os.fspath(path)
        if not isinstance(text, str) or not text or text == ":memory:" or text.startswith("file:"):
            raise InvalidInputError(f"path must be a database file path, got {path!r}")
        if synchronous not in ("NORMAL", "FULL"):
            raise InvalidInputError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        for name, seconds in (("lock_timeout", lock_timeout), ("busy_timeout", busy_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise InvalidInputError(f"{name} must be seconds, got {shown(seconds)}")
            if not (math.isfinite(seconds) and seconds > 0):
                raise InvalidInputError(f"{name} must be positive and finite, got {seconds!r}")
        self._lock_timeout = float(lock_timeout)
        self._path = Path(text)
        self._lock_dir = self._path.with_name(self._path.name + ".locks")
        self._backing = f"sqlite:{self._path.resolve()}"
        self._locks = FileLocks(self._lock_dir, hint=_HINT)
        self._reads = ReadCache()
        self._clock = clock
        self._db = SQLiteConnections(
            self._path,
            busy_timeout=float(busy_timeout),
            synchronous=synchronous,
            refused=lambda error: StateStoreError(f"cannot open {self._path}: {error}; {_HINT}"),
            write_lock=(self._locks, str(self._lock_dir / "write.lock")),
            hint=_HINT,
        )
        try:
            self._lock_dir.mkdir(parents=False, exist_ok=True)
        except OSError as error:
            raise StateStoreError(
                f"cannot create the lock directory {self._lock_dir}: {error}; {_HINT}"
            ) from error
        with self._db.connection() as connection:
            migrate(connection, self._db.write, self._path, _HINT)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def lock_timeout(self) -> float:
        """Seconds a turn waits for its conversation before ``LockTimeoutError``."""
        return self._lock_timeout

    def close(self) -> None:
        """Close every pooled connection; the store cannot be used afterwards."""
        self._db.close()

    # -- StateStore ---------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, conversation_id: str) -> AsyncIterator[_SQLiteTransaction]:
        """Hold ``conversation_id`` exclusively (across processes) until the block exits.

        Waits at most ``lock_timeout`` seconds for a turn elsewhere to let go of it.
        """
        check_conversation_id(conversation_id)
        self._db.check_open()
        with holding(self._backing, conversation_id):
            fd = await self._locks.acquire(conversation_id, timeout=self._lock_timeout)
            transaction = _SQLiteTransaction(self, conversation_id)
            try:
                yield transaction
            finally:
                transaction.closed = True
                when_done(transaction.in_flight, lambda: release(fd))

    async def pending_outbox(self, topic: str, limit: int = 1000) -> tuple[OutboxItem, ...]:
        """Outbox items of ``topic`` not yet applied nor quarantined, oldest first.

        A row that cannot be read back (not JSON, nested too deeply, not an item) is
        quarantined on the spot and named in a warning, so it cannot block the items after it.
        """
        check_topic(topic)
        check_limit(limit, minimum=1)
        while True:
            rows = await self._db.run(
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
                    items.append(decode_item(item_id, item_topic, payload))
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
            with self._db.write(connection):
                cursor = connection.execute(
                    "UPDATE outbox SET quarantine_reason = ?, quarantined_at = ? "
                    "WHERE id = ? AND applied = 0 AND quarantine_reason IS NULL",
                    (reason[:_REASON_CHARS], stamp, item_id),
                )
                return cursor.rowcount == 1

        return await self._db.run(mark)

    async def quarantined_outbox(
        self, topic: str | None = None, limit: int = 1000
    ) -> tuple[QuarantinedOutboxItem, ...]:
        """Items set aside and not requeued, of ``topic`` (else every topic), oldest first."""
        if topic is not None and not isinstance(topic, str):
            raise InvalidInputError(f"topic must be a string or None, got {shown(topic)}")
        check_limit(limit, minimum=1)
        rows = await self._db.run(
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
        wanted = [(item_id,) for item_id in check_outbox_ids(ids)]
        if not wanted:
            return 0

        def release(connection: sqlite3.Connection) -> int:
            with self._db.write(connection):
                return connection.executemany(
                    "UPDATE outbox SET quarantine_reason = NULL, quarantined_at = NULL "
                    "WHERE id = ? AND applied = 0 AND quarantine_reason IS NOT NULL",
                    wanted,
                ).rowcount

        return await self._db.run(release)

    async def complete_outbox(self, ids: Sequence[str]) -> None:
        """Mark items applied; unknown ids are ignored."""
        wanted = [(item_id,) for item_id in check_outbox_ids(ids)]
        if not wanted:
            return

        def mark(connection: sqlite3.Connection) -> None:
            with self._db.write(connection):
                connection.executemany("UPDATE outbox SET applied = 1 WHERE id = ?", wanted)

        await self._db.run(mark)

    # -- internals ------------------------------------------------------------------------

    async def _set_aside(self, unreadable: Sequence[tuple[int, str, str, str]]) -> None:
        """Quarantine outbox rows that cannot be read, by seq, and name each in a warning."""
        stamp = self._clock().astimezone(UTC).isoformat()
        marks = [(reason[:_REASON_CHARS], stamp, seq) for seq, _, _, reason in unreadable]

        def mark(connection: sqlite3.Connection) -> None:
            with self._db.write(connection):
                connection.executemany(
                    "UPDATE outbox SET quarantine_reason = ?, quarantined_at = ? "
                    "WHERE seq = ? AND applied = 0 AND quarantine_reason IS NULL",
                    marks,
                )

        await self._db.run(mark)
        for _, item_id, conversation_id, reason in unreadable:
            logger.warning(
                "outbox item %s of conversation %s in %s is quarantined and will not be "
                "retried on its own: %s",
                shown(item_id),
                shown(conversation_id),
                self._path,
                reason,
            )

    # -- users ---------------------------------------------------------------------------

    async def link_user(self, conversation_id: str, user_id: str) -> None:
        """Record that ``conversation_id`` belongs to ``user_id`` (``erase_user`` removes it
        with the user); commits with a memory turn effect link themselves."""
        check_conversation_id(conversation_id)
        user_id = check_user_id(user_id)

        def link(connection: sqlite3.Connection) -> None:
            with self._db.write(connection):
                connection.execute(_LINK, (conversation_id, user_id))

        await self._db.run(link)

    async def erase_user(self, user_id: str) -> StateErasure:
        """Remove, in one transaction, the state, transcript and outbox items of every
        conversation of ``user_id`` and every outbox item naming them
        (``affect_memory.state.user_links``); running it again removes nothing more."""
        user_id = check_user_id(user_id)

        def erase(connection: sqlite3.Connection) -> StateErasure:
            with self._db.write(connection):
                linked = {
                    conversation_id
                    for (conversation_id,) in connection.execute(
                        "SELECT conversation_id FROM conversation_users WHERE user_id = ?",
                        (user_id,),
                    )
                }
                items, named = outbox_naming(
                    connection.execute("SELECT id, conversation_id, payload FROM outbox"),
                    user_id,
                )
                conversations = sorted(linked | named)
                messages = outbox = 0
                for conversation_id in conversations:
                    messages += connection.execute(
                        "DELETE FROM messages WHERE conversation_id = ?", (conversation_id,)
                    ).rowcount
                    outbox += connection.execute(
                        "DELETE FROM outbox WHERE conversation_id = ?", (conversation_id,)
                    ).rowcount
                    for statement in (
                        "DELETE FROM conversations WHERE conversation_id = ?",
                        "DELETE FROM turn_affect WHERE conversation_id = ?",
                        "DELETE FROM conversation_users WHERE conversation_id = ?",
                    ):
                        connection.execute(statement, (conversation_id,))
                for item_id in sorted(items):
                    outbox += connection.execute(
                        "DELETE FROM outbox WHERE id = ?", (item_id,)
                    ).rowcount
                connection.execute("DELETE FROM conversation_users WHERE user_id = ?", (user_id,))
            self._reads.forget(conversations)
            return StateErasure(user_id, tuple(conversations), messages, outbox)

        return await self._db.run(erase)

    # -- conversation history (``affect_memory.state.turn_history``) ---------------------

    async def conversations(self, user_id: str) -> tuple[ConversationSummary, ...]:
        """The conversations linked to ``user_id``, by conversation id."""
        user_id = check_user_id(user_id)
        return await self._db.run(lambda c: list_conversations(c, user_id))

    async def conversation_turns(
        self, user_id: str, conversation_id: str
    ) -> tuple[ConversationTurn, ...] | None:
        """The turns of ``conversation_id`` in order; None unless it belongs to ``user_id``."""
        user_id = check_user_id(user_id)
        check_conversation_id(conversation_id)
        return await self._db.run(lambda c: read_turns(c, user_id, conversation_id))

    async def claim_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Link ``conversation_id`` to ``user_id`` before a turn; False (nothing written) when
        it belongs to another user, or holds turns and belongs to nobody."""
        check_conversation_id(conversation_id)
        user_id = check_user_id(user_id)

        def claimed(connection: sqlite3.Connection) -> bool:
            with self._db.write(connection):
                return claim(connection, conversation_id, user_id)

        return await self._db.run(claimed)

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
        changed since: a turn that got past a removed lock file, or an ``erase_user`` meanwhile,
        changed it, and writing over that would lose the turn or bring erased data back.
        """
        now = self._clock()
        prepared = prepare_commit(state, messages, outbox, now)
        state_json = (
            None
            if prepared.state is None
            else encode_state(prepared.state)
        )
        message_rows = [
            (conversation_id, message.role, message.content, message.timestamp)
            for message in prepared.messages
        ]
        outbox_rows = [
            (item.id, item.topic, encode_payload(item, index), conversation_id)
            for index, item in enumerate(prepared.outbox)
        ]
        stamp = now.astimezone(UTC).isoformat()
        links = [(conversation_id, user) for user in sorted(payload_users(prepared.outbox))]
        history = turn_affect_rows(prepared.messages, prepared.state)

        def write(connection: sqlite3.Connection) -> None:
            with self._db.write(connection):
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
                    add_turn_affect(connection, conversation_id, history)
                if outbox_rows:
                    connection.executemany(
                        "INSERT OR IGNORE INTO outbox (id, topic, payload, conversation_id) "
                        "VALUES (?, ?, ?, ?)",
                        outbox_rows,
                    )
                if links:
                    connection.executemany(_LINK, links)

        return write


class _SQLiteTransaction(WorkerTransaction):
    """One held conversation of a ``SQLiteStateStore``."""

    def __init__(self, store: SQLiteStateStore, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self._store = store
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

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        future = self._store._db.submit(work)
        self.in_flight.append(future)
        return await asyncio.wrap_future(future)

    async def load_state(self) -> AffectState | None:
        """The committed state, or None for a new conversation."""
        self._check_open()

        def read(connection: sqlite3.Connection) -> AffectState | None:
            seen = self._see(connection)
            if seen is not None:
                return self._store._reads.state_of(self._conversation_id, seen[0])
            return self._store._reads.read_state(connection, self._conversation_id)

        return await self._run(read)

    async def load_transcript(self, limit: int | None = None) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        self._check_open()
        if limit is not None:
            check_limit(limit, minimum=1)

        def read(connection: sqlite3.Connection) -> tuple[Message, ...]:
            self._see(connection)
            return self._store._reads.read_transcript(connection, self._conversation_id, limit)

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
        self._check_first_commit()
        work = self._store._commit_work(self._conversation_id, state, messages, outbox, self._seen)
        self.committed = True
        try:
            await self._run(work)
        except BaseException:
            if self._last_call_failed():
                self.committed = False  # nothing was written; a retry is allowed
            raise
