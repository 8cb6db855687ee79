"""The PostgreSQL store keeps the store contract on a real server, locks a conversation per
turn across processes, and leaves nothing half-written when any step of a commit fails.

Each test gets a schema of its own, dropped afterwards (``tests/plugin/postgres_fixture.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.plugin.state.postgres_fixture import (
    require_psycopg,
    run_sql,
    server_url,
    temporary_schema,
)

require_psycopg()

from affect_memory.errors import LockTimeoutError  # noqa: E402
from affect_memory.kernel import (  # noqa: E402
    AffectState,
    CorruptStateError,
    DefaultAppraisalPolicy,
    InvalidInputError,
    Mood,
    StateStoreError,
)
from affect_memory.kernel.adapters import ScriptedModel  # noqa: E402
from affect_memory.kernel.engine import AffectEngine  # noqa: E402
from affect_memory.kernel.protocols import GateResult, Message, OutboxItem  # noqa: E402
from affect_memory.state.postgres import (  # noqa: E402
    SCHEMA_VERSION,
    PostgresStateStore,
    conversation_lock_key,
)
from tests.contracts.state_store_contract import (  # noqa: E402
    StateStoreContract,
    StoreFactory,
    WaitWatch,
)
from tests.plugin.state.history_checks import (  # noqa: E402
    assert_history_replays,
    postgres_history,
)
from tests.plugin.state.sqlite_worker import intent_of, message_for, reply_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
POLICY = DefaultAppraisalPolicy()
Opener = Callable[..., PostgresStateStore]


@pytest.fixture
def url() -> str:
    return server_url()


@pytest.fixture
def schema(url: str) -> Iterator[str]:
    with temporary_schema(url) as name:
        yield name


@pytest.fixture
def open_store(url: str, schema: str) -> Iterator[Opener]:
    """Open stores on the test's schema; every one is closed before the schema is dropped."""
    stores: list[PostgresStateStore] = []

    def open_one(**options: Any) -> PostgresStateStore:
        stores.append(PostgresStateStore(options.pop("url", url), schema=schema, **options))
        return stores[-1]

    yield open_one
    for store in stores:
        store.close()


class TestPostgresStateStore(StateStoreContract):
    @pytest.fixture
    def make_store(self, open_store: Opener) -> StoreFactory:
        return open_store

    @pytest.fixture
    def watch_waits(self, url: str, schema: str) -> WaitWatch:
        return lambda _store, conversation: until_waiting(url, schema, conversation)


@pytest.fixture
def store(open_store: Opener) -> PostgresStateStore:
    return open_store()


# -- helpers ------------------------------------------------------------------------------


def dump(url: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the schema: what a failed call must leave unchanged."""
    tables = ("conversations", "messages", "outbox", "turn_affect", "schema_version")
    return {t: run_sql(url, f'SELECT * FROM "{schema}".{t} ORDER BY 1, 2') for t in tables}


def is_held(url: str, schema: str, conversation: str) -> bool:
    """Whether any session holds the conversation's lock (tried from a session of our own)."""
    import psycopg

    key = conversation_lock_key(schema, conversation)
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        assert row is not None
        if row[0]:
            connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
    return not row[0]


def waiters(url: str, schema: str, conversation: str) -> int:
    """How many sessions wait (not granted) for the conversation's lock."""
    return _waiting_for_key(url, conversation_lock_key(schema, conversation))


def _waiting_for_key(url: str, key: int) -> int:
    """How many sessions wait (not granted) for the advisory lock ``key``."""
    rows = run_sql(
        url,
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND objsubid = 1 AND classid::bigint = %s AND objid::bigint = %s",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
    )
    return int(rows[0][0])


async def until(condition: Callable[[], bool], what: str, within: float = 30.0) -> None:
    """Return once ``condition()`` holds, polling; fail naming ``what`` past ``within`` seconds
    (a bound for a loaded machine: the conditions polled here come true in milliseconds)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {within:g} s")
        await asyncio.sleep(0.01)


async def until_waiting(url: str, schema: str, conversation: str, count: int = 1) -> None:
    """Return once ``count`` sessions wait at the server for the conversation's lock."""
    await until(
        lambda: waiters(url, schema, conversation) >= count,
        f"{count} session(s) never waited for {conversation!r}",
    )


def holder_activity(url: str, schema: str, conversation: str) -> tuple[int, str, object]:
    """(pid, state, xact_start) of the session holding the conversation's lock."""
    key = conversation_lock_key(schema, conversation)
    rows = run_sql(
        url,
        "SELECT a.pid, a.state, a.xact_start FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
        "AND l.classid::bigint = %s AND l.objid::bigint = %s",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
    )
    assert len(rows) == 1, rows
    pid, state, started = rows[0]
    return int(pid), str(state), started


def stored(url: str, schema: str, conversation: str) -> tuple[AffectState | None, list[Any]]:
    """The committed state and (role, content) transcript, read straight from the tables."""
    state_rows = run_sql(
        url,
        f'SELECT state FROM "{schema}".conversations WHERE conversation_id = %s',
        (conversation,),
    )
    messages = run_sql(
        url,
        f'SELECT role, content FROM "{schema}".messages WHERE conversation_id = %s ORDER BY seq',
        (conversation,),
    )
    state = (
        AffectState.model_validate(json.loads(state_rows[0][0])["state"]) if state_rows else None
    )
    return state, [(role, content) for role, content in messages]


def assert_paired_and_replayable(state: AffectState | None, transcript: list[Any]) -> None:
    """Strict user/assistant pairs, and the state equals replaying them in commit order."""
    assert len(transcript) % 2 == 0
    replayed = AffectState()
    for user, assistant in zip(transcript[::2], transcript[1::2], strict=True):
        assert user[0] == "user" and assistant == ("assistant", reply_for(user[1]))
        replayed = POLICY.appraise(replayed, intent_of(user[1]), user[1]).state
    assert state == (replayed if transcript else None)


def _state(valence: float = 0.3) -> AffectState:
    return AffectState(mood=Mood(valence=valence))


def _messages(*contents: str) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=text)
        for i, text in enumerate(contents)
    ]


async def _commit_one(store: PostgresStateStore, conversation: str = "c1") -> AffectState:
    state = _state()
    async with store.transaction(conversation) as transaction:
        await transaction.commit(state=state, messages=_messages("hello"))
    return state


async def _transcript(store: PostgresStateStore, conversation: str) -> list[str]:
    async with store.transaction(conversation) as transaction:
        return [message.content for message in await transaction.load_transcript()]


class Holder:
    """A task of its own holding a conversation until ``release``; waiters must run in other
    tasks, since a task that already holds a conversation refuses to wait for it."""

    def __init__(self, store: PostgresStateStore, conversation: str) -> None:
        self._held, self._release = asyncio.Event(), asyncio.Event()
        self.task = asyncio.create_task(self._hold(store, conversation))
        self.commit: list[Message] = []

    async def _hold(self, store: PostgresStateStore, conversation: str) -> None:
        async with store.transaction(conversation) as transaction:
            self._held.set()
            await self._release.wait()
            if self.commit:
                await transaction.commit(state=None, messages=self.commit)

    async def __aenter__(self) -> Holder:
        await self._held.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        await self.task


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- schema -------------------------------------------------------------------------------


async def test_opening_creates_the_tables_in_the_schema_and_records_the_version(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    tables = run_sql(
        url, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
    )
    assert {name for (name,) in tables} == {
        "conversations",
        "messages",
        "outbox",
        "conversation_users",
        "turn_affect",
        "schema_version",
    }
    versions = run_sql(url, f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert versions == [(version,) for version in range(1, SCHEMA_VERSION + 1)]  # each once
    assert store.schema == schema


async def test_opening_again_changes_nothing(open_store: Opener, url: str, schema: str) -> None:
    first = open_store()
    await _commit_one(first)
    before = dump(url, schema)
    open_store()
    assert dump(url, schema) == before


def test_many_sessions_opening_a_new_schema_at_once_migrate_it_once(url: str, schema: str) -> None:
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []
    stores: list[PostgresStateStore] = []

    def open_one() -> None:
        barrier.wait()
        try:
            stores.append(PostgresStateStore(url, schema=schema, pool_size=1))
        except BaseException as error:  # collected for the main thread
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for opened in stores:
        opened.close()
    assert errors == []
    versions = run_sql(url, f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert versions == [(version,) for version in range(1, SCHEMA_VERSION + 1)]  # each once


def test_a_newer_schema_version_is_refused_in_one_line(
    open_store: Opener, url: str, schema: str
) -> None:
    open_store()
    run_sql(url, f"INSERT INTO \"{schema}\".schema_version VALUES (7, 'from the future')")
    with pytest.raises(StateStoreError, match="schema version 7") as caught:
        PostgresStateStore(url, schema=schema)
    assert "\n" not in str(caught.value)
    assert f"reads version {SCHEMA_VERSION}" in str(caught.value)


def test_tables_of_something_else_in_the_schema_are_refused(url: str, schema: str) -> None:
    run_sql(url, f'CREATE SCHEMA "{schema}"')
    run_sql(url, f'CREATE TABLE "{schema}".messages (id int)')
    with pytest.raises(StateStoreError, match="no affect-memory schema_version"):
        PostgresStateStore(url, schema=schema)
    assert run_sql(
        url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (schema,)
    ) == [(1,)]


def test_an_unreachable_server_is_refused_in_one_line() -> None:
    port = _free_port()
    with pytest.raises(StateStoreError, match=f"cannot connect to PostgreSQL at .*:{port}") as e:
        PostgresStateStore(f"postgresql://127.0.0.1:{port}/test", connect_timeout=2)
    assert "\n" not in str(e.value)


def test_a_malformed_url_is_refused_without_echoing_the_password() -> None:
    with pytest.raises(InvalidInputError, match="url") as caught:
        PostgresStateStore("postgresql://me:s3cret@[::1/test")
    assert "s3cret" not in str(caught.value)


def test_an_unreachable_server_error_never_shows_the_password() -> None:
    port = _free_port()
    with pytest.raises(StateStoreError) as caught:
        PostgresStateStore(f"postgresql://me:s3cret@127.0.0.1:{port}/test", connect_timeout=2)
    assert "s3cret" not in str(caught.value) and "me@127.0.0.1" in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("schema", "Mixed_Case"),
        ("schema", "1st"),
        ("schema", ""),
        ("schema", "x" * 64),
        ("lock_timeout", 0),
        ("lock_timeout", -1),
        ("lock_timeout", True),
        ("lock_timeout", float("inf")),
        ("connect_timeout", 0),
        ("pool_size", 0),
        ("pool_size", True),
        ("pool_size", 2.0),
    ],
)
def test_bad_options_are_refused_before_connecting(option: str, value: object) -> None:
    unreachable = f"postgresql://127.0.0.1:{_free_port()}/test"
    with pytest.raises(InvalidInputError, match=option):
        PostgresStateStore(unreachable, **{option: value})  # type: ignore[arg-type]


async def test_schemas_share_neither_conversations_nor_locks(url: str, open_store: Opener) -> None:
    with temporary_schema(url) as other_schema:
        here = open_store()
        there = PostgresStateStore(url, schema=other_schema, lock_timeout=2)
        try:
            await _commit_one(here, "same id")
            async with here.transaction("same id"), there.transaction("same id") as transaction:
                assert await transaction.load_state() is None
                await transaction.commit(state=None, messages=_messages("there"))
            assert await _transcript(here, "same id") == ["hello"]
            assert await _transcript(there, "same id") == ["there"]
        finally:
            there.close()


# -- rows ---------------------------------------------------------------------------------


async def test_state_is_stored_as_versioned_json(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    state = await _commit_one(store)
    ((text,),) = run_sql(url, f'SELECT state FROM "{schema}".conversations')
    envelope = json.loads(text)
    assert envelope["version"] == 1
    assert AffectState.model_validate(envelope["state"]) == state


@pytest.mark.parametrize(
    ("stored_text", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"state": {}}', "envelope"),
        ('{"version": 2, "state": {}}', "format version 2"),
        ('{"version": 1, "state": {"mood": {"valence": 5}}}', "failed validation"),
    ],
)
async def test_an_unreadable_state_row_names_the_conversation(
    store: PostgresStateStore, url: str, schema: str, stored_text: str, problem: str
) -> None:
    await _commit_one(store, "broken one")
    run_sql(url, f'UPDATE "{schema}".conversations SET state = %s', (stored_text,))
    async with store.transaction("broken one") as transaction:
        with pytest.raises(CorruptStateError, match=problem) as caught:
            await transaction.load_state()
    assert "'broken one'" in str(caught.value)


async def test_an_unreadable_message_row_names_the_message_and_conversation(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    await _commit_one(store)
    run_sql(url, f'UPDATE "{schema}".messages SET "timestamp" = \'2026-01-01T10:00:00\'')
    async with store.transaction("c1") as transaction:
        with pytest.raises(CorruptStateError, match=r"message 1 of conversation 'c1'"):
            await transaction.load_transcript()


async def test_an_unreadable_outbox_payload_names_the_item(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    async with store.transaction("c1") as transaction:
        await transaction.commit(
            state=None, messages=(), outbox=[OutboxItem(id="item-7", topic="memory")]
        )
    run_sql(url, f"UPDATE \"{schema}\".outbox SET payload = '[1, 2'")
    with pytest.raises(CorruptStateError, match="outbox item 'item-7'"):
        await store.pending_outbox("memory")


async def test_a_failing_pooled_call_names_what_it_was_doing_and_to_which_part_of_the_store(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    run_sql(url, f'DROP TABLE "{schema}".outbox, "{schema}".conversation_users')
    with pytest.raises(StateStoreError, match="could not read the outbox in schema"):
        await store.pending_outbox("memory")
    with pytest.raises(StateStoreError, match="could not complete items of the outbox in"):
        await store.complete_outbox(["item-1"])
    with pytest.raises(StateStoreError, match="link a user to a conversation in the state store"):
        await store.link_user("c1", "ann")
    with pytest.raises(StateStoreError, match="could not erase a user from the state store"):
        await store.erase_user("ann")


@pytest.mark.parametrize(
    ("messages", "outbox", "named"),
    [
        (_messages("ok", "nul\x00inside"), [], r"messages\[1\]\.content"),
        (_messages("lone \ud800 surrogate"), [], r"messages\[0\]\.content"),
        ([], [OutboxItem(id="a\x00b", topic="memory")], r"outbox\[0\]\.id"),
        ([], [OutboxItem(id="a", topic="mem\x00ory")], r"outbox\[0\]\.topic"),
    ],
)
async def test_text_postgresql_cannot_store_is_refused_by_name_and_nothing_is_written(
    store: PostgresStateStore,
    url: str,
    schema: str,
    messages: list[Message],
    outbox: list[OutboxItem],
    named: str,
) -> None:
    await _commit_one(store)
    before = dump(url, schema)
    async with store.transaction("c1") as transaction:
        with pytest.raises(InvalidInputError, match=named):
            await transaction.commit(state=_state(0.9), messages=messages, outbox=outbox)
    assert dump(url, schema) == before


async def test_a_conversation_id_with_a_nul_is_refused(store: PostgresStateStore) -> None:
    with pytest.raises(InvalidInputError, match="conversation_id"):
        async with store.transaction("a\x00b"):
            pass


async def test_an_outbox_payload_that_is_not_json_is_refused(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    await _commit_one(store)
    before = dump(url, schema)
    item = OutboxItem(id="x", topic="memory", payload={"bad": float("nan")})
    async with store.transaction("c1") as transaction:
        with pytest.raises(InvalidInputError, match="JSON"):
            await transaction.commit(state=None, messages=(), outbox=[item])
    assert dump(url, schema) == before


async def test_the_engine_runs_on_the_store(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    model = ScriptedModel(gates=[GateResult(intent="curiosity")], replies=[["hi ", "there"]])
    engine = AffectEngine(model=model, store=store, conversation_id="c1")
    result = await engine.turn("hello")
    assert result.text == "hi there"
    assert stored(url, schema, "c1")[1] == [("user", "hello"), ("assistant", "hi there")]


async def test_a_closed_store_refuses_work(open_store: Opener) -> None:
    closed = open_store()
    closed.close()
    with pytest.raises(StateStoreError, match="closed"):
        async with closed.transaction("c1"):
            pass


async def test_a_pooled_connection_the_server_dropped_is_replaced(
    open_store: Opener, url: str, schema: str
) -> None:
    name = f"am-drop-{schema}"
    separator = "&" if "?" in url else "?"
    store = open_store(url=f"{url}{separator}application_name={name}")
    await _commit_one(store)
    dropped = run_sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (name,),
    )
    assert dropped and all(ok for (ok,) in dropped)
    await until(  # pg_terminate_backend only signals: wait for the session to be gone
        lambda: not run_sql(
            url, "SELECT 1 FROM pg_stat_activity WHERE application_name = %s", (name,)
        ),
        "the terminated session never went away",
    )
    assert await _transcript(store, "c1") == ["hello"]
    assert await store.pending_outbox("memory") == ()


# -- the conversation lock ----------------------------------------------------------------


async def test_the_conversation_lock_is_held_only_inside_the_transaction(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    assert not is_held(url, schema, "c1")
    async with store.transaction("c1") as transaction:
        assert is_held(url, schema, "c1")
        await transaction.commit(state=None, messages=_messages("x"))
        assert is_held(url, schema, "c1")
    assert not is_held(url, schema, "c1")


async def test_no_transaction_stays_open_while_a_turn_holds_its_conversation(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    await _commit_one(store)
    async with store.transaction("c1") as transaction:
        await transaction.load_state()
        await transaction.load_transcript(limit=10)
        # Here the engine would generate: the holding session must be idle, not in a transaction.
        _, state, started = holder_activity(url, schema, "c1")
        assert (state, started) == ("idle", None)
        await transaction.commit(state=_state(0.1), messages=_messages("after"))
        _, state, started = holder_activity(url, schema, "c1")
        assert (state, started) == ("idle", None)


async def test_a_held_conversation_times_out_with_an_error_naming_it(
    open_store: Opener, url: str, schema: str
) -> None:
    holder, waiter = open_store(), open_store(lock_timeout=0.4)
    async with Holder(holder, "busy one") as held:
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match=r"'busy one' after 0\.4 s") as caught:
            async with waiter.transaction("busy one"):
                pass
        assert time.monotonic() - started >= 0.4
        assert caught.value.conversation_id == "busy one" and caught.value.timeout == 0.4
        assert isinstance(caught.value, StateStoreError)
        held.commit = _messages("holder")
    assert await _transcript(waiter, "busy one") == ["holder"]
    assert not is_held(url, schema, "busy one")


async def test_a_turn_of_the_same_process_times_out_too(open_store: Opener) -> None:
    store = open_store(lock_timeout=0.3)
    held, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with store.transaction("c1"):
            held.set()
            await release.wait()

    task = asyncio.create_task(holder())
    await held.wait()
    with pytest.raises(LockTimeoutError, match="this process"):
        async with store.transaction("c1"):
            pass
    release.set()
    await task


async def test_repeated_timeouts_leak_no_connection(open_store: Opener) -> None:
    holder, waiter = open_store(), open_store(lock_timeout=0.2, pool_size=1)
    async with Holder(holder, "c1"):
        for _ in range(4):
            with pytest.raises(LockTimeoutError):
                async with waiter.transaction("c1"):
                    pass
    async with asyncio.timeout(5), waiter.transaction("c1") as transaction:
        await transaction.commit(state=None, messages=_messages("after"))


async def test_waiters_for_one_conversation_do_not_use_up_the_pool(
    open_store: Opener, url: str, schema: str
) -> None:
    holder, busy = open_store(), open_store(pool_size=2, lock_timeout=30)
    entered: list[int] = []
    asked = 0
    acquire = busy._sessions.acquire

    async def counting_acquire(*args: Any) -> Any:
        nonlocal asked
        asked += 1
        return await acquire(*args)

    busy._sessions.acquire = counting_acquire  # type: ignore[method-assign]

    async def wait_for_hot(n: int) -> None:
        async with busy.transaction("hot") as transaction:
            entered.append(n)
            await transaction.commit(state=None, messages=_messages(f"waiter {n}"))

    async with Holder(holder, "hot"):
        waiters = [asyncio.create_task(wait_for_hot(n)) for n in range(5)]
        # Every waiter has asked for the lock, and one of them waits for it at the server.
        await until(lambda: asked == 5, "the waiters never all asked for the lock")
        await until_waiting(url, schema, "hot")
        async with asyncio.timeout(5), busy.transaction("cold") as transaction:
            await transaction.commit(state=None, messages=_messages("cold"))
        assert entered == []
    async with asyncio.timeout(30):
        await asyncio.gather(*waiters)
    assert sorted(await _transcript(busy, "hot")) == [f"waiter {n}" for n in range(5)]


async def test_a_cancelled_waiter_does_not_keep_the_lock(
    open_store: Opener, url: str, schema: str
) -> None:
    holder, waiter_store = open_store(), open_store(pool_size=1)
    async with Holder(holder, "c1"):
        waiter = asyncio.create_task(waiter_store.transaction("c1").__aenter__())
        await until_waiting(url, schema, "c1")  # blocked in pg_advisory_lock on the server
        assert not waiter.done()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    deadline = time.monotonic() + 30.0  # the server drops the lock in milliseconds; load aside
    while is_held(url, schema, "c1") and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not is_held(url, schema, "c1")
    async with asyncio.timeout(10), waiter_store.transaction("c1") as transaction:
        await transaction.commit(state=None, messages=_messages("ok"))


async def test_one_store_serializes_tasks_of_one_conversation(store: PostgresStateStore) -> None:
    async def count_up() -> None:
        for _ in range(10):
            async with store.transaction("counter") as transaction:
                seen = len(await transaction.load_transcript())
                await asyncio.sleep(0)
                await transaction.commit(
                    state=None, messages=[Message(role="user", content=str(seen))]
                )

    await asyncio.gather(*(count_up() for _ in range(4)))
    assert await _transcript(store, "counter") == [str(n) for n in range(40)]


async def test_a_commit_cancelled_mid_write_keeps_the_lock_until_the_write_ends(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    import psycopg

    # The commit's INSERT blocks on a lock this test holds, until the test lets it go.
    gate = conversation_lock_key(schema, "the test's gate on the commit")
    run_sql(
        url,
        f'CREATE FUNCTION "{schema}".gated() RETURNS trigger LANGUAGE plpgsql AS '
        f"$$ BEGIN PERFORM pg_advisory_xact_lock({gate}); RETURN NEW; END $$",
    )
    run_sql(
        url,
        f'CREATE TRIGGER gated AFTER INSERT ON "{schema}".messages '
        f'FOR EACH STATEMENT EXECUTE FUNCTION "{schema}".gated()',
    )

    async def turn() -> None:
        async with store.transaction("c1") as transaction:
            await transaction.commit(state=None, messages=_messages("late"))

    with psycopg.connect(url, autocommit=True) as gatekeeper:
        gatekeeper.execute("SELECT pg_advisory_lock(%s)", (gate,))
        task = asyncio.create_task(turn())
        await until(lambda: _waiting_for_key(url, gate) == 1, "the commit never reached the gate")
        task.cancel()
        # The write cannot end while the gate is shut: a turn that let go of its lock (or ended)
        # on cancellation would show it within this window.
        done, _ = await asyncio.wait({task}, timeout=0.5)
        assert not done
        assert is_held(url, schema, "c1")
        assert stored(url, schema, "c1")[1] == []
        gatekeeper.execute("SELECT pg_advisory_unlock(%s)", (gate,))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not is_held(url, schema, "c1")
    assert stored(url, schema, "c1")[1] == [("user", "late")]


async def test_a_turn_whose_connection_drops_says_so_and_the_next_turn_completes(
    store: PostgresStateStore, url: str, schema: str
) -> None:
    await _commit_one(store)
    before = dump(url, schema)
    async with store.transaction("c1") as transaction:
        await transaction.load_state()
        pid, _, _ = holder_activity(url, schema, "c1")
        run_sql(url, "SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StateStoreError, match="lost the PostgreSQL connection"):
            await transaction.commit(state=_state(0.9), messages=_messages("lost"))
        with pytest.raises(StateStoreError, match="lost the PostgreSQL connection"):
            await transaction.load_state()
    assert dump(url, schema) == before
    assert not is_held(url, schema, "c1")
    async with asyncio.timeout(10), store.transaction("c1") as transaction:
        await transaction.commit(state=None, messages=_messages("next"))
    assert await _transcript(store, "c1") == ["hello", "next"]


# -- a failure at each step of a commit leaves nothing visible ----------------------------

_RAISE = "BEGIN RAISE EXCEPTION 'injected fault'; END"
_DIE = "BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); RETURN NULL; END"

FAULTS = {
    # name: (conversation the failing commit writes, trigger definition, body, error)
    "state insert": (
        "fresh",
        "BEFORE INSERT ON {s}.conversations FOR EACH ROW",
        _RAISE,
        "injected",
    ),
    "state update": ("c1", "BEFORE UPDATE ON {s}.conversations FOR EACH ROW", _RAISE, "injected"),
    "messages": ("c1", "AFTER INSERT ON {s}.messages FOR EACH ROW", _RAISE, "injected"),
    "turn history": ("c1", "AFTER INSERT ON {s}.turn_affect FOR EACH ROW", _RAISE, "injected"),
    "outbox": ("c1", "AFTER INSERT ON {s}.outbox FOR EACH ROW", _RAISE, "injected"),
    "at COMMIT": (
        "c1",
        "AFTER INSERT ON {s}.outbox DEFERRABLE INITIALLY DEFERRED FOR EACH ROW",
        _RAISE,
        "injected",
    ),
    "connection lost at COMMIT": (
        "c1",
        "AFTER INSERT ON {s}.outbox DEFERRABLE INITIALLY DEFERRED FOR EACH ROW",
        _DIE,
        "lost the PostgreSQL connection",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_failure_at_any_step_of_a_commit_leaves_nothing_visible(
    store: PostgresStateStore, url: str, schema: str, fault: str
) -> None:
    conversation, timing, body, error = FAULTS[fault]
    kept = OutboxItem(id="o1", topic="memory", payload={"turn": 1})
    async with store.transaction("c1") as transaction:
        await transaction.commit(state=_state(0.1), messages=_messages("u1", "a1"), outbox=[kept])
    quoted = f'"{schema}"'
    run_sql(url, f"CREATE FUNCTION {quoted}.fault() RETURNS trigger LANGUAGE plpgsql AS $${body}$$")
    constraint = "CONSTRAINT " if "DEFERRED" in timing else ""
    run_sql(
        url,
        f"CREATE {constraint}TRIGGER fault {timing.format(s=quoted)} "
        f"EXECUTE FUNCTION {quoted}.fault()",
    )
    before = dump(url, schema)
    new = OutboxItem(id="o2", topic="memory", payload={"turn": 2})
    lost = fault.startswith("connection")
    async with store.transaction(conversation) as transaction:
        assert await transaction.load_state() == (None if conversation == "fresh" else _state(0.1))
        with pytest.raises(StateStoreError, match=error):
            await transaction.commit(
                state=_state(0.9), messages=_messages("u2", "a2"), outbox=[new]
            )
        assert dump(url, schema) == before
        assert await store.pending_outbox("memory") == (kept,)
        run_sql(url, f"DROP TRIGGER fault ON {quoted}.{timing.split()[3].split('.')[1]}")
        if not lost:  # rolled back on a live connection: the same turn may commit again
            await transaction.commit(
                state=_state(0.9), messages=_messages("u2", "a2"), outbox=[new]
            )
    assert not is_held(url, schema, conversation)
    if lost:
        async with asyncio.timeout(10), store.transaction(conversation) as transaction:
            await transaction.commit(
                state=_state(0.9), messages=_messages("u2", "a2"), outbox=[new]
            )
    assert await store.pending_outbox("memory") == (kept, new)
    async with store.transaction(conversation) as transaction:
        assert await transaction.load_state() == _state(0.9)
        assert [m.content for m in await transaction.load_transcript()][-2:] == ["u2", "a2"]


# -- other processes ----------------------------------------------------------------------


class Worker:
    """A worker process (``tests/plugin/state/postgres_worker.py``) with its own connection pool."""

    def __init__(self, mode: str, url: str, schema: str, conversation: str, **options: object):
        command = [sys.executable, "-m", "tests.plugin.state.postgres_worker", mode, "--url", url]
        command += ["--schema", schema, "--conversation", conversation]
        for name, value in options.items():
            command += ["--" + name.replace("_", "-"), str(value)]
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, wanted: str, timeout: float = 60.0) -> None:
        """Wait until the worker prints ``wanted``; fail with its stderr if it exits first."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.kill()
                pytest.fail(f"worker did not print {wanted!r} within {timeout}s")
            if line is None:
                self.process.wait(timeout=30)
                assert self.process.stderr is not None
                pytest.fail(f"worker exited before {wanted!r}: {self.process.stderr.read()}")
            if line == wanted:
                return

    def finish(self, timeout: float = 120.0) -> None:
        """Wait for a clean exit."""
        self.expect("DONE", timeout)
        assert self.process.wait(timeout=30) == 0

    def kill(self) -> None:
        """SIGKILL: no cleanup code of the worker runs, its sockets close with the process."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


def test_a_worker_killed_mid_turn_releases_the_conversation(url: str, schema: str) -> None:
    Worker("turns", url, schema, "victim", worker=0).finish()
    before = dump(url, schema)
    hung = Worker("hang", url, schema, "victim", worker=1)
    try:
        hung.expect("STREAMING")
        assert is_held(url, schema, "victim")
        _, activity, started = holder_activity(url, schema, "victim")
        assert (activity, started) == ("idle", None)  # generation holds no transaction open

        async def next_turn(timeout: float) -> str:
            store = PostgresStateStore(url, schema=schema, lock_timeout=timeout)
            engine = AffectEngine(model=ScriptedModel(), store=store, conversation_id="victim")
            try:
                return (await engine.turn(message_for(2, 0))).text
            finally:
                store.close()

        with pytest.raises(LockTimeoutError, match="'victim'"):
            asyncio.run(next_turn(0.5))
    finally:
        hung.kill()
    assert hung.process.returncode == -signal.SIGKILL
    assert dump(url, schema) == before
    Worker("turns", url, schema, "victim", worker=2, start=0).finish(timeout=30)
    state, transcript = stored(url, schema, "victim")
    assert [content for _, content in transcript[::2]] == [message_for(0, 0), message_for(2, 0)]
    assert_paired_and_replayable(state, transcript)
    # after the kill: one history row per committed turn, none for the killed one
    assert_history_replays(*postgres_history(url, schema, "victim"))


def test_a_turn_waiting_on_a_killed_holder_completes_once_its_connection_drops(
    url: str, schema: str
) -> None:
    Worker("turns", url, schema, "victim", worker=0).finish()
    hung = Worker("hang", url, schema, "victim", worker=1)
    waiter: Worker | None = None
    try:
        hung.expect("STREAMING")
        holder, _, _ = holder_activity(url, schema, "victim")
        # Another process's next turn, willing to wait 300 s, queues behind the hung one.
        waiter = Worker("turns", url, schema, "victim", worker=2, start=0, lock_timeout=300)
        waiter.expect("READY")
        deadline = time.monotonic() + 60
        while waiters(url, schema, "victim") == 0:
            assert waiter.process.poll() is None, "the waiting worker exited"
            assert time.monotonic() < deadline, "the next turn never waited for the lock"
            time.sleep(0.05)
        assert holder_activity(url, schema, "victim")[0] == holder  # still the hung worker's
        hung.kill()
        # The lock goes with the killed worker's connection, not at the waiter's 300 s
        # timeout: its turn completes within 60 s (a bound for a loaded machine).
        waiter.finish(timeout=60)
    finally:
        hung.kill()
        if waiter is not None:
            waiter.kill()
    assert hung.process.returncode == -signal.SIGKILL
    state, transcript = stored(url, schema, "victim")
    assert [content for _, content in transcript[::2]] == [message_for(0, 0), message_for(2, 0)]
    assert_paired_and_replayable(state, transcript)


def test_processes_on_one_conversation_lose_no_update(
    url: str, schema: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    workers = [
        Worker("turns", url, schema, "shared", worker=w, turns=15, go_file=go, delay=0.001)
        for w in range(3)
    ]
    for worker in workers:
        worker.expect("READY")
    go.touch()
    for worker in workers:
        worker.finish()
    state, transcript = stored(url, schema, "shared")
    assert len(transcript) == 90
    assert_paired_and_replayable(state, transcript)
    users = [content for role, content in transcript if role == "user"]
    owners = [user.split(" ", 1)[0] for user in users]
    assert sum(a != b for a, b in itertools.pairwise(owners)) >= 2, "the workers never contended"
    for w in range(3):
        assert [u for u in users if u.startswith(f"w{w} ")] == [
            message_for(w, t) for t in range(15)
        ]
