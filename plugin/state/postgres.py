"""The server state store: conversation state, transcripts and the outbox in PostgreSQL,
shared safely by many worker processes on many hosts.

Locking. A turn holds its conversation with a *session-level* advisory lock
(``pg_advisory_lock`` on :func:`conversation_lock_key`, a stable 64-bit hash of the schema and
the conversation id), taken on a connection the turn leases from the pool for its whole length
and given back (unlocked) when the turn ends. Load and commit run on that same connection as
short transactions of their own: each read is one autocommit statement, the commit one
``BEGIN … COMMIT`` sent as a single pipeline. While the model generates, the connection sits
``idle`` — not ``idle in transaction`` — so no snapshot, row lock or open transaction spans
generation. A transaction-scoped lock (``pg_advisory_xact_lock``, ``SELECT … FOR UPDATE``)
would have to keep a transaction open across generation to last the turn; the session lock
is the deliberate way to hold a conversation for a turn with transactions kept short.

Because the lock belongs to the session, the commit is written on the session that holds it: if
that connection drops (worker killed, network cut, server restart) the server frees the lock and
the dead connection cannot commit either, so no second turn can ever slip in between a turn's
load and its commit (``erase_user`` takes the locks of the conversations it erases too, so a
turn in flight commits first and is erased with the rest). A worker that dies mid-turn closes
its socket and the server ends the session, releasing the conversation at once; for a host that
vanishes without closing its sockets, server-side TCP keepalives set on every session (about 25
s) end it.

Waiting is bounded: turns of one conversation in one process queue on an in-process gate (so
waiters do not each hold a pooled connection), then on the server lock with ``lock_timeout``
set to what is left of ``lock_timeout`` seconds; past it :class:`LockTimeoutError` names the
conversation and the timeout.

Schema: ``affect_memory.state.postgres_schema`` (one configurable PostgreSQL schema, migrated on
open). A commit writes its turns' history rows (the mood after each, ``postgres_history``) in
the same transaction.

Durability: a returned commit is a committed PostgreSQL transaction (with the server's
``synchronous_commit``). PostgreSQL text cannot hold NUL characters, so messages,
conversation ids and outbox ids or topics containing one are refused before anything is
written.

The module is about 520 lines because the store's every method runs under the locking and
reconnection rules above (a turn's on one leased connection, the rest on pooled ones); split, a
method could be read without the rule it depends on.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC
from typing import TypeVar

from psycopg import sql

try:
    import psycopg
    import psycopg_pool  # noqa: F401 - the sessions' pool; refused here with the hint if missing
    from psycopg.conninfo import conninfo_to_dict
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "PostgresStateStore needs psycopg 3 and psycopg-pool: pip install 'affect-memory[postgres]'"
    ) from missing

from affect_memory.db import DEFAULT_POOL_SIZE
from affect_memory.db.location import redacted
from affect_memory.db.postgres_connections import (
    SCHEMA_NAME,
    Connection,
    check_storable,
    connect_first,
    display,
    one_line,
    set_lock_timeout,
)
from affect_memory.kernel.adapters.store_support import check_outbox_ids, holding, prepare_commit
from affect_memory.kernel.bounds import check_conversation_id, check_limit
from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.errors import CorruptStateError, InvalidInputError, StateStoreError, shown
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import Message, OutboxItem
from affect_memory.redaction import normalize_userinfo, redact, url_secrets
from affect_memory.state.common import (
    ClosingStore,
    WorkerTransaction,
    check_topic,
    decode_item,
    decode_messages,
    decode_state,
    encode_payload,
    encode_state,
)
from affect_memory.state.postgres_history import (
    HistoryStatements,
    claim,
    history_parameters,
    list_conversations,
    read_turns,
)
from affect_memory.state.postgres_schema import (
    DEFAULT_SCHEMA,
    SCHEMA_VERSION,
    Statements,
    migrate,
)
from affect_memory.state.postgres_sessions import (
    ConnectionLostError,
    Lease,
    Sessions,
    conversation_lock_key,
)
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

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "PostgresStateStore",
    "conversation_lock_key",
]

_T = TypeVar("_T")


class PostgresStateStore(ClosingStore):
    """A ``StateStore`` in a PostgreSQL schema; safe across tasks, processes and hosts.

    Use one instance per process; it keeps a pool of up to ``pool_size`` connections, one per
    running turn. Instances anywhere on the same database and schema cooperate.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        lock_timeout: float = 30.0,
        pool_size: int = DEFAULT_POOL_SIZE,
        connect_timeout: float = 10.0,
        clock: Clock = utc_now,
    ) -> None:
        """Connect to ``url`` (a libpq URL or keyword string), migrating ``schema`` if needed."""
        if not isinstance(url, str) or not url.strip():
            raise InvalidInputError(f"url must be a PostgreSQL connection URL, got {shown(url)}")
        if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError(
                "schema must be a lower-case PostgreSQL identifier (letters, digits, _; at most "
                f"63 characters, not starting with a digit), got {shown(schema)}"
            )
        for name, seconds in (("lock_timeout", lock_timeout), ("connect_timeout", connect_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise InvalidInputError(f"{name} must be seconds, got {shown(seconds)}")
            if not (math.isfinite(seconds) and seconds > 0):
                raise InvalidInputError(f"{name} must be positive and finite, got {seconds!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError(f"pool_size must be a positive integer, got {shown(pool_size)}")
        url = normalize_userinfo(url)  # a password with an unencoded / or @ reaches libpq whole
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as error:
            reason = redact(one_line(error), url_secrets(url))
            raise InvalidInputError(
                f"url is not a PostgreSQL connection URL ({reason}): {shown(redacted(url))}"
            ) from None
        self._schema = schema
        self._lock_timeout = float(lock_timeout)
        self._clock = clock
        self._display = display(params)
        self._backing = f"{self._display}#{schema}"
        self._sql = Statements.for_schema(schema)
        self._history = HistoryStatements.for_schema(schema)
        first, kwargs = connect_first(
            url,
            connect_timeout=connect_timeout,
            application_name="affect-memory",
            refused=lambda reason: StateStoreError(
                f"cannot connect to PostgreSQL at {self._display}: {reason}"
            ),
        )
        try:
            migrate(
                first,
                schema=schema,
                display=self._display,
                lock_timeout=self._lock_timeout,
                statements=self._sql,
            )
        finally:
            first.close()
        self._sessions = Sessions(
            url,
            kwargs,
            schema=schema,
            display=self._display,
            statements=self._sql,
            lock_timeout=self._lock_timeout,
            pool_size=pool_size,
        )

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding this store's tables."""
        return self._schema

    @property
    def url(self) -> str:
        """Where the store connects, without any password."""
        return self._display

    @property
    def lock_timeout(self) -> float:
        """Seconds a turn waits for its conversation before ``LockTimeoutError``."""
        return self._lock_timeout

    def close(self) -> None:
        """Close the pool; the store cannot be used afterwards."""
        self._sessions.close()

    # -- StateStore ---------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, conversation_id: str) -> AsyncIterator[_PostgresTransaction]:
        """Hold ``conversation_id`` exclusively across processes and hosts until the block ends."""
        check_conversation_id(conversation_id)
        check_storable(conversation_id, "conversation_id")
        self._sessions.check_open()
        with holding(self._backing, conversation_id):
            gate = self._sessions.gate(conversation_id)
            lease = await self._sessions.acquire(conversation_id, gate)
            transaction = _PostgresTransaction(self, conversation_id, lease)
            try:
                yield transaction
            finally:
                transaction.closed = True
                try:
                    released = self._sessions.release_when_done(lease, transaction.in_flight)
                    await asyncio.shield(asyncio.wrap_future(released))
                finally:
                    gate.release()

    async def pending_outbox(self, topic: str, limit: int = 1000) -> tuple[OutboxItem, ...]:
        """Outbox items of ``topic`` not yet applied, oldest first."""
        check_topic(topic)
        check_limit(limit, minimum=1)
        if "\x00" in topic:
            return ()  # no stored topic can hold one
        statement = self._sql.pending
        rows = await self._sessions.pooled(
            lambda c: c.execute(statement, (topic, limit)).fetchall(), "read", "the outbox"
        )
        items: list[OutboxItem] = []
        for item_id, item_topic, payload in rows:
            try:
                items.append(decode_item(item_id, item_topic, payload))
            except CorruptStateError as error:
                raise CorruptStateError(
                    f"outbox item {shown(item_id)} in schema {self._schema!r} cannot be read: "
                    f"{error}"
                ) from error
        return tuple(items)

    async def complete_outbox(self, ids: Sequence[str]) -> None:
        """Mark items applied; unknown ids are ignored."""
        wanted = [item_id for item_id in check_outbox_ids(ids) if "\x00" not in item_id]
        if not wanted:
            return
        statement = self._sql.complete
        await self._sessions.pooled(
            lambda c: c.execute(statement, (wanted,)), "complete items of", "the outbox"
        )

    # -- users ---------------------------------------------------------------------------

    @functools.cached_property
    def _user_sql(self) -> dict[str, str]:
        """The statements over ``conversation_users`` and what erasing a user deletes."""
        tables = {
            name: sql.Identifier(self._schema, name)
            for name in ("conversations", "messages", "outbox", "conversation_users")
        }

        def render(text: str) -> str:
            return sql.SQL(text).format(**tables).as_string(None)

        return {
            "link": render(
                "INSERT INTO {conversation_users} (conversation_id, user_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING"
            ),
            "linked": render("SELECT conversation_id FROM {conversation_users} WHERE user_id = %s"),
            "outbox": render("SELECT id, conversation_id, payload FROM {outbox}"),
            "messages": render("DELETE FROM {messages} WHERE conversation_id = ANY(%s)"),
            "outbox_of": render("DELETE FROM {outbox} WHERE conversation_id = ANY(%s)"),
            "outbox_ids": render("DELETE FROM {outbox} WHERE id = ANY(%s)"),
            "conversations": render("DELETE FROM {conversations} WHERE conversation_id = ANY(%s)"),
            "links": render(
                "DELETE FROM {conversation_users} WHERE user_id = %s OR conversation_id = ANY(%s)"
            ),
        }

    async def link_user(self, conversation_id: str, user_id: str) -> None:
        """Record that ``conversation_id`` belongs to ``user_id`` (``erase_user`` removes it
        with the user); commits with a memory turn effect link themselves."""
        check_conversation_id(conversation_id)
        check_storable(conversation_id, "conversation_id")
        user_id = check_user_id(user_id)
        statement = self._user_sql["link"]
        await self._sessions.pooled(
            lambda c: c.execute(statement, (conversation_id, user_id)),
            "link a user to a conversation in",
        )

    async def erase_user(self, user_id: str) -> StateErasure:
        """Remove, in one transaction, the state, transcript and outbox items of every
        conversation of ``user_id`` and every outbox item naming them
        (``affect_memory.state.user_links``); running it again removes nothing more.

        It first takes each of those conversations' advisory locks for its transaction, so a
        turn in flight on one commits first and is erased with the rest (it would otherwise
        commit after the erasure, from the state it loaded before), and a turn that starts
        meanwhile waits and then finds nothing. Waiting is bounded by ``lock_timeout``.
        """
        user_id = check_user_id(user_id)
        statements, history = self._user_sql, self._history

        def erase(connection: Connection) -> StateErasure:
            with connection.transaction():
                set_lock_timeout(connection, self._lock_timeout)
                held: set[str] = set()
                while True:  # a turn that commits while this waits may name another one
                    linked = {
                        row[0] for row in connection.execute(statements["linked"], (user_id,))
                    }
                    items, named = outbox_naming(
                        connection.execute(statements["outbox"]).fetchall(), user_id
                    )
                    conversations = sorted(linked | named)
                    fresh = [ident for ident in conversations if ident not in held]
                    if not fresh:
                        break
                    for key in sorted(conversation_lock_key(self._schema, c) for c in fresh):
                        connection.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
                    held.update(fresh)
                messages = connection.execute(statements["messages"], (conversations,)).rowcount
                outbox = connection.execute(statements["outbox_of"], (conversations,)).rowcount
                outbox += connection.execute(statements["outbox_ids"], (sorted(items),)).rowcount
                connection.execute(statements["conversations"], (conversations,))
                connection.execute(history.erase, (conversations,))
                connection.execute(statements["links"], (user_id, conversations))
            return StateErasure(user_id, tuple(conversations), messages, outbox)

        return await self._sessions.pooled(erase, "erase a user from")

    # -- conversation history (``affect_memory.state.turn_history``) ---------------------

    async def conversations(self, user_id: str) -> tuple[ConversationSummary, ...]:
        """The conversations linked to ``user_id``, by conversation id."""
        user_id = check_user_id(user_id)
        history = self._history
        return await self._sessions.pooled(
            lambda c: list_conversations(c, history, user_id), "list the conversations in"
        )

    async def conversation_turns(
        self, user_id: str, conversation_id: str
    ) -> tuple[ConversationTurn, ...] | None:
        """The turns of ``conversation_id`` in order; None unless it belongs to ``user_id``."""
        user_id = check_user_id(user_id)
        check_conversation_id(conversation_id)
        if "\x00" in conversation_id:
            return None  # no stored conversation id can hold one
        history = self._history
        return await self._sessions.pooled(
            lambda c: read_turns(c, history, user_id, conversation_id), "read a conversation in"
        )

    async def claim_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Link ``conversation_id`` to ``user_id`` before a turn; False (nothing written) when
        it belongs to another user, or holds turns and belongs to nobody."""
        check_conversation_id(conversation_id)
        check_storable(conversation_id, "conversation_id")
        user_id = check_user_id(user_id)
        history = self._history
        return await self._sessions.pooled(
            lambda c: claim(c, history, conversation_id, user_id), "claim a conversation in"
        )

    def _read_state(self, connection: Connection, conversation_id: str) -> AffectState | None:
        row = connection.execute(self._sql.read_state, (conversation_id,)).fetchone()
        return None if row is None else decode_state(conversation_id, row[0])

    def _read_transcript(
        self, connection: Connection, conversation_id: str, limit: int | None
    ) -> tuple[Message, ...]:
        if limit is None:
            rows = connection.execute(self._sql.read_transcript, (conversation_id,)).fetchall()
        else:
            rows = connection.execute(self._sql.read_newest, (conversation_id, limit)).fetchall()
        return decode_messages(conversation_id, rows)

    def _commit_work(
        self, conversation_id: str, state: object, messages: object, outbox: object
    ) -> Callable[[Connection], None]:
        """Check and serialize a commit here; the returned work only writes."""
        now = self._clock()
        prepared = prepare_commit(state, messages, outbox, now)
        for index, message in enumerate(prepared.messages):
            check_storable(message.content, f"messages[{index}].content")
        for index, item in enumerate(prepared.outbox):
            check_storable(item.id, f"outbox[{index}].id")
            check_storable(item.topic, f"outbox[{index}].topic")
        state_json = None if prepared.state is None else encode_state(prepared.state)
        payloads = [encode_payload(item, index) for index, item in enumerate(prepared.outbox)]
        message_rows = {
            "conversation": conversation_id,
            "roles": [message.role for message in prepared.messages],
            "contents": [message.content for message in prepared.messages],
            "stamps": [message.timestamp for message in prepared.messages],
        }
        outbox_rows = {
            "conversation": conversation_id,
            "ids": [item.id for item in prepared.outbox],
            "topics": [item.topic for item in prepared.outbox],
            "payloads": payloads,
        }
        stamp = now.astimezone(UTC)
        statements = self._sql
        links = [(conversation_id, user) for user in sorted(payload_users(prepared.outbox))]
        link = self._user_sql["link"]
        history = turn_affect_rows(prepared.messages, prepared.state)
        add_history, history_rows = self._history.add, history_parameters(conversation_id, history)

        def write(connection: Connection) -> None:
            # One round trip: BEGIN, the writes and COMMIT travel as one pipeline; any
            # failure rolls the whole transaction back.
            with connection.pipeline(), connection.transaction():
                if state_json is not None:
                    connection.execute(
                        statements.upsert_state, (conversation_id, state_json, stamp)
                    )
                if message_rows["roles"]:
                    connection.execute(statements.append_messages, message_rows)
                if history:
                    connection.execute(add_history, history_rows)
                if outbox_rows["ids"]:
                    connection.execute(statements.add_outbox, outbox_rows)
                for pair in links:
                    connection.execute(link, pair)

        return write


class _PostgresTransaction(WorkerTransaction):
    """One held conversation of a ``PostgresStateStore``."""

    def __init__(self, store: PostgresStateStore, conversation_id: str, lease: Lease) -> None:
        super().__init__(conversation_id)
        self._store = store
        self._lease = lease
        self.lost: str | None = None
        """Why the connection holding the lock is gone; the transaction is then unusable."""

    def _check_open(self) -> None:
        super()._check_open()
        if self.lost is not None:
            raise StateStoreError(self.lost)

    async def _run(self, work: Callable[[Connection], _T], what: str) -> _T:
        store, connection = self._store, self._lease.connection

        def call() -> _T:
            try:
                return work(connection)
            except psycopg.Error as error:
                raise store._sessions.failure(
                    connection, f"conversation {shown(self._conversation_id)}", what, error
                ) from error

        future = store._sessions.submit(store._sessions.work, call)
        self.in_flight.append(future)
        try:
            return await asyncio.wrap_future(future)
        except ConnectionLostError as error:
            self.lost = str(error)
            raise

    async def load_state(self) -> AffectState | None:
        """The committed state, or None for a new conversation."""
        self._check_open()
        return await self._run(
            lambda c: self._store._read_state(c, self._conversation_id), "load the state of"
        )

    async def load_transcript(self, limit: int | None = None) -> tuple[Message, ...]:
        """Committed messages in commit order; with ``limit``, only the newest ``limit``."""
        self._check_open()
        if limit is not None:
            check_limit(limit, minimum=1)
        return await self._run(
            lambda c: self._store._read_transcript(c, self._conversation_id, limit),
            "load the transcript of",
        )

    async def commit(
        self,
        *,
        state: AffectState | None,
        messages: Sequence[Message],
        outbox: Sequence[OutboxItem] = (),
    ) -> None:
        """Write state (None keeps the old), messages and outbox in one PostgreSQL transaction.

        If the caller is cancelled mid-commit, the write still finishes (or rolls back)
        before the conversation's lock is released. If the connection drops during the
        commit, the error says so: the turn was then written whole or not at all.
        """
        self._check_first_commit()
        work = self._store._commit_work(self._conversation_id, state, messages, outbox)
        self.committed = True
        try:
            await self._run(work, "commit")
        except ConnectionLostError as error:
            raise ConnectionLostError(
                f"{error}; the commit was written whole or not at all, and the next "
                "transaction reads which"
            ) from error
        except BaseException:
            if self._last_call_failed():
                self.committed = False  # rolled back: nothing was written, a retry is allowed
            raise
