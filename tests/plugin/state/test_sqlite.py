"""The SQLite store keeps the store contract, on a real file, and refuses rows it cannot read."""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from affect_memory import LockTimeoutError, SQLiteStateStore
from affect_memory.kernel import (
    AffectState,
    CorruptStateError,
    InvalidInputError,
    Mood,
    StateStoreError,
)
from affect_memory.kernel.adapters import ScriptedModel
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.protocols import GateResult, Message
from affect_memory.state.sqlite import SCHEMA_VERSION
from tests.contracts.snapshots import dump_sqlite
from tests.contracts.state_store_contract import StateStoreContract, StoreFactory, WaitWatch
from tests.plugin.state.sqlite_waits import watch_waits


class TestSQLiteStateStore(StateStoreContract):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Iterator[StoreFactory]:
        stores: list[SQLiteStateStore] = []

        def make() -> SQLiteStateStore:
            stores.append(SQLiteStateStore(tmp_path / "state.db"))
            return stores[-1]

        yield make
        for store in stores:
            store.close()

    @pytest.fixture
    def watch_waits(self) -> WaitWatch:
        return watch_waits


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStateStore]:
    opened = SQLiteStateStore(db)
    yield opened
    opened.close()


async def _commit_one(store: SQLiteStateStore, conversation: str = "c1") -> AffectState:
    state = AffectState(mood=Mood(valence=0.3))
    async with store.transaction(conversation) as transaction:
        await transaction.commit(state=state, messages=[Message(role="user", content="hello")])
    return state


def _sql(db: Path, statement: str, *parameters: object) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(db)
    try:
        with connection:
            return connection.execute(statement, parameters).fetchall()
    finally:
        connection.close()


async def test_the_database_uses_wal_and_a_versioned_schema(
    store: SQLiteStateStore, db: Path
) -> None:
    assert _sql(db, "PRAGMA journal_mode") == [("wal",)]
    assert _sql(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    tables = {name for (name,) in _sql(db, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"conversations", "messages", "outbox"} <= tables


async def test_state_is_stored_as_versioned_json(store: SQLiteStateStore, db: Path) -> None:
    state = await _commit_one(store)
    ((text,),) = _sql(db, "SELECT state FROM conversations WHERE conversation_id = 'c1'")
    envelope = json.loads(str(text))
    assert envelope["version"] == 1
    assert AffectState.model_validate(envelope["state"]) == state


async def test_messages_keep_role_content_and_a_zoned_utc_time(
    store: SQLiteStateStore, db: Path
) -> None:
    await _commit_one(store)
    ((role, content, stamp),) = _sql(db, "SELECT role, content, timestamp FROM messages")
    assert (role, content) == ("user", "hello")
    assert str(stamp).endswith("+00:00")


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"state": {}}', "envelope"),
        ('{"version": 2, "state": {}}', "format version 2"),
        ('{"version": 1, "state": {"mood": {"valence": 5}}}', "failed validation"),
        ('{"version": 1, "state": {"surprise": 1}}', "failed validation"),
    ],
)
async def test_an_unreadable_state_row_names_the_conversation(
    store: SQLiteStateStore, db: Path, stored: str, problem: str
) -> None:
    await _commit_one(store, "broken one")
    _sql(db, "UPDATE conversations SET state = ? WHERE conversation_id = 'broken one'", stored)
    async with store.transaction("broken one") as transaction:
        with pytest.raises(CorruptStateError, match=problem) as caught:
            await transaction.load_state()
    assert "'broken one'" in str(caught.value)


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ('{"version": true, "state": {}}', "format version True"),
        ('{"version": 1.0, "state": {}}', "format version 1.0"),
        ('{"version": 1, "state": {"mood": {"valence": 5}}}', "state.mood.valence "),
        ('{"version": 1, "state": {"surprise": 1}}', "state.surprise "),
    ],
)
async def test_a_state_of_a_non_integer_version_or_a_bad_field_is_refused_in_one_line_naming_it(
    store: SQLiteStateStore, db: Path, stored: str, problem: str
) -> None:
    await _commit_one(store, "c9")
    _sql(db, "UPDATE conversations SET state = ? WHERE conversation_id = 'c9'", stored)
    async with store.transaction("c9") as transaction:
        with pytest.raises(CorruptStateError, match=problem) as caught:
            await transaction.load_state()
    assert "\n" not in str(caught.value)


async def test_a_turn_on_an_unreadable_state_fails_and_writes_nothing(
    store: SQLiteStateStore, db: Path
) -> None:
    await _commit_one(store)
    _sql(db, 'UPDATE conversations SET state = \'{"version": 1, "state": []}\'')
    before = dump_sqlite(db)
    engine = AffectEngine(model=ScriptedModel(), store=store, conversation_id="c1")
    with pytest.raises(CorruptStateError, match="'c1'"):
        await engine.turn("hello again")
    assert dump_sqlite(db) == before


async def test_an_unreadable_message_row_names_the_conversation(
    store: SQLiteStateStore, db: Path
) -> None:
    await _commit_one(store)
    _sql(db, "UPDATE messages SET timestamp = '2026-01-01T10:00:00'")
    async with store.transaction("c1") as transaction:
        with pytest.raises(CorruptStateError, match=r"message 1 of conversation 'c1'"):
            await transaction.load_transcript()


def test_a_newer_schema_is_refused_with_a_hint(db: Path) -> None:
    SQLiteStateStore(db).close()
    _sql(db, "PRAGMA user_version = 7")
    with pytest.raises(StateStoreError, match="schema version 7"):
        SQLiteStateStore(db)


def test_a_file_that_is_not_a_database_is_refused(db: Path) -> None:
    db.write_bytes(b"this is not a database, just some bytes" * 100)
    with pytest.raises(StateStoreError, match="file is not a database"):
        SQLiteStateStore(db)


@pytest.mark.parametrize("path", [":memory:", "", "file:x?mode=memory"])
def test_a_path_that_is_not_a_file_is_refused(path: str) -> None:
    with pytest.raises(InvalidInputError, match="path"):
        SQLiteStateStore(path)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("busy_timeout", 0),
        ("busy_timeout", True),
        ("busy_timeout", float("inf")),
        ("lock_timeout", 0),
        ("lock_timeout", -1.0),
        ("lock_timeout", float("nan")),
        ("lock_timeout", "5"),
        ("synchronous", "OFF"),
    ],
)
def test_bad_options_are_refused(db: Path, option: str, value: object) -> None:
    with pytest.raises(InvalidInputError, match=option):
        SQLiteStateStore(db, **{option: value})  # type: ignore[arg-type]


def test_reopening_keeps_the_data(db: Path) -> None:
    first = SQLiteStateStore(db)
    state = asyncio.run(_commit_one(first))
    first.close()
    second = SQLiteStateStore(db)

    async def load() -> object:
        async with second.transaction("c1") as transaction:
            return await transaction.load_state()

    assert asyncio.run(load()) == state
    second.close()


async def test_a_closed_store_refuses_work(db: Path) -> None:
    closed = SQLiteStateStore(db)
    closed.close()
    with pytest.raises(StateStoreError, match="closed"):
        async with closed.transaction("c1"):
            pass


def _lock_file(db: Path, conversation: str) -> Path:
    digest = hashlib.sha256(conversation.encode()).hexdigest()
    return db.with_name(db.name + ".locks") / f"{digest}.lock"


async def _released(path: Path, within: float = 30.0) -> bool:
    """Whether the lock file is free, waiting up to ``within`` seconds for abandoned waiter
    threads to hand it back (they do in milliseconds; a loaded machine may take seconds)."""
    deadline = time.monotonic() + within
    while not _can_lock(path):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def _can_lock(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


async def test_the_conversation_lock_is_an_os_lock_held_only_inside_the_transaction(
    store: SQLiteStateStore, db: Path
) -> None:
    lock = _lock_file(db, "c1")
    async with store.transaction("c1"):
        assert not _can_lock(lock)
    assert _can_lock(lock)


async def test_a_cancelled_waiter_does_not_keep_the_lock(store: SQLiteStateStore, db: Path) -> None:
    release = asyncio.Event()
    held = asyncio.Event()

    async def holder() -> None:
        async with store.transaction("c1"):
            held.set()
            await release.wait()

    holding = asyncio.create_task(holder())
    await held.wait()
    waits = watch_waits(store, "c1")
    waiter = asyncio.create_task(store.transaction("c1").__aenter__())
    async with asyncio.timeout(30):
        await waits  # its thread blocks on the lock file now
    assert not waiter.done()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    await holding
    async with asyncio.timeout(5):
        async with store.transaction("c1") as transaction:
            await transaction.commit(state=None, messages=[Message(role="user", content="ok")])
    # the abandoned waiter thread hands the lock straight back
    assert await _released(_lock_file(db, "c1"))


async def test_a_held_conversation_times_out_with_an_error_naming_it(db: Path) -> None:
    holder, waiter = SQLiteStateStore(db), SQLiteStateStore(db, lock_timeout=0.3)
    release, held = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with holder.transaction("busy one") as transaction:
            held.set()
            await release.wait()
            await transaction.commit(state=None, messages=[Message(role="user", content="h")])

    try:
        task = asyncio.create_task(hold())
        await held.wait()
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match=r"'busy one' after 0\.3 s") as caught:
            async with waiter.transaction("busy one"):
                pass
        assert time.monotonic() - started >= 0.3
        assert caught.value.conversation_id == "busy one" and caught.value.timeout == 0.3
        assert isinstance(caught.value, StateStoreError)
        assert waiter.lock_timeout == 0.3 and holder.lock_timeout == 30.0
        release.set()
        await task
        async with asyncio.timeout(5), waiter.transaction("busy one") as transaction:
            assert [m.content for m in await transaction.load_transcript()] == ["h"]
    finally:
        holder.close()
        waiter.close()


async def test_repeated_timeouts_leave_no_lock_behind(store: SQLiteStateStore, db: Path) -> None:
    impatient = SQLiteStateStore(db, lock_timeout=0.1)
    release, held = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with store.transaction("c1"):
            held.set()
            await release.wait()

    try:
        task = asyncio.create_task(hold())
        await held.wait()
        for _ in range(3):
            with pytest.raises(LockTimeoutError):
                async with impatient.transaction("c1"):
                    pass
        release.set()
        await task
        # Each abandoned waiter thread gets the lock in turn and hands it straight back.
        assert await _released(_lock_file(db, "c1"))
        async with asyncio.timeout(5), impatient.transaction("c1") as transaction:
            await transaction.commit(state=None, messages=[Message(role="user", content="in")])
    finally:
        impatient.close()


async def test_a_commit_waits_for_the_write_lock_at_most_the_busy_timeout(db: Path) -> None:
    store = SQLiteStateStore(db, busy_timeout=0.3)
    write_lock = db.with_name(db.name + ".locks") / "write.lock"
    fd = os.open(write_lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process stopped in the middle of its commit
    try:
        started = time.monotonic()
        with pytest.raises(StateStoreError, match=r"write lock of .* after 0\.3 s"):
            async with store.transaction("c1") as transaction:
                await transaction.commit(state=None, messages=[Message(role="user", content="x")])
        assert time.monotonic() - started >= 0.3
        assert _can_lock(_lock_file(db, "c1"))  # the failed turn let go of its conversation
    finally:
        os.close(fd)
    try:
        async with asyncio.timeout(5), store.transaction("c1") as transaction:
            assert await transaction.load_transcript() == ()
            await transaction.commit(state=None, messages=[Message(role="user", content="y")])
    finally:
        store.close()
    assert _sql(db, "SELECT content FROM messages") == [("y",)]


def test_threads_with_their_own_stores_never_lose_an_update(db: Path) -> None:
    SQLiteStateStore(db).close()
    errors: list[BaseException] = []

    async def count_up(rounds: int) -> None:
        store = SQLiteStateStore(db)
        for _ in range(rounds):
            async with store.transaction("counter") as transaction:
                seen = len(await transaction.load_transcript())
                await asyncio.sleep(0.001)
                await transaction.commit(
                    state=None, messages=[Message(role="user", content=str(seen))]
                )
        store.close()

    def run() -> None:
        try:
            asyncio.run(count_up(20))
        except BaseException as error:  # collected for the main thread
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    contents = [content for (content,) in _sql(db, "SELECT content FROM messages ORDER BY seq")]
    assert contents == [str(n) for n in range(60)]


async def test_one_store_serializes_tasks_of_one_conversation(store: SQLiteStateStore) -> None:
    async def count_up() -> None:
        for _ in range(10):
            async with store.transaction("counter") as transaction:
                seen = len(await transaction.load_transcript())
                await asyncio.sleep(0)
                await transaction.commit(
                    state=None, messages=[Message(role="user", content=str(seen))]
                )

    await asyncio.gather(*(count_up() for _ in range(4)))
    async with store.transaction("counter") as transaction:
        contents = [m.content for m in await transaction.load_transcript()]
    assert contents == [str(n) for n in range(40)]


async def test_an_outbox_payload_that_is_not_json_is_refused(
    store: SQLiteStateStore, db: Path
) -> None:
    from affect_memory.kernel.protocols import OutboxItem

    await _commit_one(store)
    before = dump_sqlite(db)
    item = OutboxItem(id="x", topic="memory", payload={"bad": float("nan")})
    async with store.transaction("c1") as transaction:
        with pytest.raises(InvalidInputError, match="JSON"):
            await transaction.commit(state=None, messages=(), outbox=[item])
    assert dump_sqlite(db) == before


async def test_the_engine_runs_on_the_store(store: SQLiteStateStore, db: Path) -> None:
    model = ScriptedModel(gates=[GateResult(intent="curiosity")], replies=[["hi ", "there"]])
    engine = AffectEngine(model=model, store=store, conversation_id="c1")
    result = await engine.turn("hello")
    assert result.text == "hi there"
    rows = _sql(db, "SELECT role, content FROM messages ORDER BY seq")
    assert rows == [("user", "hello"), ("assistant", "hi there")]


async def _read(store: SQLiteStateStore, limit: int | None) -> tuple[object, list[str]]:
    async with store.transaction("c1") as transaction:
        state = await transaction.load_state()
        return state, [m.content for m in await transaction.load_transcript(limit)]


async def _append(store: SQLiteStateStore, *contents: str, valence: float = 0.0) -> None:
    async with store.transaction("c1") as transaction:
        await transaction.commit(
            state=AffectState(mood=Mood(valence=valence)),
            messages=[Message(role="user", content=text) for text in contents],
        )


@pytest.mark.parametrize("limit", [1, 3, 5, 50])
async def test_a_store_that_read_before_sees_what_another_store_committed_since(
    db: Path, limit: int
) -> None:
    reader, writer = SQLiteStateStore(db), SQLiteStateStore(db)
    written: list[str] = []
    try:
        for batch, size in enumerate([0, 1, 2, 4, 7, 1, 0, 3]):
            contents = [f"b{batch}m{n}" for n in range(size)]
            await _append(writer, *contents, valence=batch / 10)
            written += contents
            state, seen = await _read(reader, limit)
            assert seen == written[-limit:]
            assert state == AffectState(mood=Mood(valence=batch / 10))
            assert (await _read(reader, None))[1] == written
    finally:
        reader.close()
        writer.close()


async def test_a_wider_window_than_the_cached_one_reads_again(db: Path) -> None:
    store = SQLiteStateStore(db)
    try:
        await _append(store, *"abcdef")
        assert (await _read(store, 2))[1] == ["e", "f"]
        assert (await _read(store, 4))[1] == ["c", "d", "e", "f"]
        await _append(store, "g")
        assert (await _read(store, 3))[1] == ["e", "f", "g"]
        assert (await _read(store, 10))[1] == list("abcdefg")
    finally:
        store.close()


async def test_a_window_too_long_to_keep_in_memory_is_read_again_correctly(db: Path) -> None:
    store = SQLiteStateStore(db)
    try:
        big = [f"{n}" + "x" * 100_000 for n in range(4)]
        await _append(store, *big[:3])
        assert (await _read(store, 3))[1] == big[:3]
        await _append(store, big[3])
        assert (await _read(store, 3))[1] == big[1:]
        await _append(store, "small")
        assert (await _read(store, 2))[1] == [big[3], "small"]
    finally:
        store.close()


async def test_a_commit_cancelled_mid_write_keeps_the_lock_until_the_write_ends(
    store: SQLiteStateStore, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing, proceed = threading.Event(), threading.Event()
    real = store._commit_work

    def slow_commit_work(*args: object) -> object:
        work = real(*args)  # type: ignore[arg-type]

        def slow(connection: sqlite3.Connection) -> None:
            writing.set()
            proceed.wait(10)
            work(connection)

        return slow

    monkeypatch.setattr(store, "_commit_work", slow_commit_work)

    async def turn() -> None:
        async with store.transaction("c1") as transaction:
            await transaction.commit(state=None, messages=[Message(role="user", content="late")])

    task = asyncio.create_task(turn())
    await asyncio.to_thread(writing.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _can_lock(_lock_file(db, "c1"))  # the write is still running: the lock is kept
    proceed.set()
    other = SQLiteStateStore(db)
    try:
        async with asyncio.timeout(10), other.transaction("c1") as transaction:
            assert [m.content for m in await transaction.load_transcript()] == ["late"]
    finally:
        other.close()


async def test_a_waiter_whose_lock_file_was_removed_locks_the_file_now_there(db: Path) -> None:
    holder, waiter, latecomer = SQLiteStateStore(db), SQLiteStateStore(db), SQLiteStateStore(db)
    held, release, waiter_in = asyncio.Event(), asyncio.Event(), asyncio.Event()
    waiter_done, latecomer_in = asyncio.Event(), asyncio.Event()
    loop_thread, opened = threading.current_thread(), threading.Event()
    open_file = waiter._locks._open

    def open_noting(path: str) -> int:
        fd = open_file(path)
        if threading.current_thread() is not loop_thread:
            opened.set()  # the waiter's thread holds the file it will block on
        return fd

    waiter._locks._open = open_noting  # type: ignore[method-assign]
    latecomer_waits = watch_waits(latecomer, "c1")

    async def hold() -> None:
        async with holder.transaction("c1"):
            held.set()
            await release.wait()

    async def wait_then_hold() -> None:
        async with waiter.transaction("c1"):
            waiter_in.set()
            await waiter_done.wait()
            assert not latecomer_in.is_set(), "the latecomer got in beside the waiter"

    async def come_late() -> None:
        async with latecomer.transaction("c1"):
            latecomer_in.set()

    try:
        holding = asyncio.create_task(hold())
        await held.wait()
        waiting = asyncio.create_task(wait_then_hold())
        assert await asyncio.to_thread(opened.wait, 30), "the waiter never opened the lock file"
        assert not waiter_in.is_set()
        _lock_file(db, "c1").unlink()
        release.set()
        await holding
        async with asyncio.timeout(10):
            await waiter_in.wait()
        late = asyncio.create_task(come_late())
        async with asyncio.timeout(10):
            await latecomer_waits  # the new file at the path keeps the latecomer out
        assert not latecomer_in.is_set()
        waiter_done.set()
        async with asyncio.timeout(10):
            await waiting
            await late
    finally:
        for store in (holder, waiter, latecomer):
            store.close()


async def test_a_removed_lock_directory_is_made_again(store: SQLiteStateStore, db: Path) -> None:
    lock_dir = db.with_name(db.name + ".locks")
    for lock in lock_dir.iterdir():
        lock.unlink()
    lock_dir.rmdir()
    await _commit_one(store)
    assert lock_dir.is_dir() and _can_lock(_lock_file(db, "c1"))


async def test_a_turn_that_got_past_a_removed_lock_file_is_not_overwritten(db: Path) -> None:
    first, second = SQLiteStateStore(db), SQLiteStateStore(db)

    async def intrude() -> None:
        async with second.transaction("c1") as intruder:  # nothing stops it now
            await intruder.load_transcript()
            await intruder.commit(state=None, messages=[Message(role="user", content="b")])

    try:
        await _commit_one(first)
        async with first.transaction("c1") as held:
            await held.load_state()
            _lock_file(db, "c1").unlink()
            # A task of its own (a fresh context), as another process's turn would be.
            await asyncio.create_task(intrude(), context=contextvars.Context())
            before = dump_sqlite(db)
            with pytest.raises(StateStoreError, match="'c1' changed while this transaction"):
                await held.commit(state=AffectState(), messages=[Message(role="user", content="a")])
            assert dump_sqlite(db) == before
        assert (await _read(first, None))[1] == ["hello", "b"]
    finally:
        first.close()
        second.close()


_DEEP = "[" * 100_000 + "]" * 100_000


async def test_a_deeply_nested_state_row_is_corrupt_state_naming_the_conversation(
    store: SQLiteStateStore, db: Path
) -> None:
    await _commit_one(store, "deep one")
    _sql(db, "UPDATE conversations SET state = ?", '{"version": 1, "state": ' + _DEEP + "}")
    async with store.transaction("deep one") as transaction:
        with pytest.raises(CorruptStateError, match=r"'deep one'.*nested too deeply"):
            await transaction.load_state()


def _outbox_rows(db: Path) -> list[tuple[object, ...]]:
    return _sql(db, "SELECT id, applied FROM outbox ORDER BY seq")


async def _commit_items(store: SQLiteStateStore, *ids: str) -> None:
    from affect_memory.kernel.protocols import OutboxItem

    items = [OutboxItem(id=ident, topic="memory", payload={"n": ident}) for ident in ids]
    async with store.transaction("c1") as transaction:
        await transaction.commit(state=None, messages=(), outbox=items)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{not json", "not valid JSON"),
        (_DEEP, "nested too deeply"),
        ("[1, 2]", "not a JSON object"),
        ("null", "not a JSON object"),
    ],
)
async def test_an_unreadable_outbox_row_is_quarantined_by_id_and_the_rest_stay_pending(
    store: SQLiteStateStore,
    db: Path,
    payload: str,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _commit_items(store, "good-1", "bad", "good-2")
    _sql(db, "UPDATE outbox SET payload = ? WHERE id = 'bad'", payload)
    pending = await store.pending_outbox("memory")
    assert [item.id for item in pending] == ["good-1", "good-2"]
    (quarantined,) = await store.quarantined_outbox()
    assert (quarantined.id, quarantined.topic, quarantined.conversation_id) == (
        "bad",
        "memory",
        "c1",
    )
    assert reason in quarantined.reason
    assert "'bad'" in caplog.text and "quarantined" in caplog.text
    caplog.clear()
    assert [item.id for item in await store.pending_outbox("memory")] == ["good-1", "good-2"]
    assert "'bad'" not in caplog.text  # named once, when it was set aside


async def test_unreadable_rows_do_not_shorten_a_limited_read(
    store: SQLiteStateStore, db: Path
) -> None:
    await _commit_items(store, "bad-1", "bad-2", "good-1", "good-2", "good-3")
    _sql(db, "UPDATE outbox SET payload = 'oops' WHERE id LIKE 'bad-%'")
    assert [item.id for item in await store.pending_outbox("memory", limit=2)] == [
        "good-1",
        "good-2",
    ]


async def test_a_quarantined_item_is_never_pending_until_it_is_requeued(
    store: SQLiteStateStore, db: Path
) -> None:
    await _commit_items(store, "m1", "m2")
    assert await store.quarantine_outbox("m1", "payload misses 'turn_id'") is True
    assert await store.quarantine_outbox("m1", "again") is False  # already set aside
    assert await store.quarantine_outbox("never-written", "x") is False
    assert [item.id for item in await store.pending_outbox("memory")] == ["m2"]
    (held,) = await store.quarantined_outbox("memory")
    assert (held.id, held.reason) == ("m1", "payload misses 'turn_id'")
    assert json.loads(held.payload) == {"n": "m1"}
    assert datetime.fromisoformat(held.quarantined_at).utcoffset() is not None
    assert await store.quarantined_outbox("other topic") == ()
    assert await store.requeue_outbox(["m1", "m2", "never-written"]) == 1
    assert [item.id for item in await store.pending_outbox("memory")] == ["m1", "m2"]
    assert await store.quarantined_outbox() == ()


async def test_a_completed_item_cannot_be_quarantined(store: SQLiteStateStore) -> None:
    await _commit_items(store, "m1")
    await store.complete_outbox(["m1"])
    assert await store.quarantine_outbox("m1", "too late") is False
    assert await store.quarantined_outbox() == ()


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda s: s.quarantine_outbox("", "reason"), "item_id"),
        (lambda s: s.quarantine_outbox(7, "reason"), "item_id"),
        (lambda s: s.quarantine_outbox("m1", "  "), "reason"),
        (lambda s: s.quarantined_outbox(3), "topic"),
        (lambda s: s.quarantined_outbox(limit=0), "limit"),
        (lambda s: s.requeue_outbox("m1"), "ids"),
        (lambda s: s.requeue_outbox([1]), "ids"),
    ],
)
async def test_bad_quarantine_arguments_are_refused(
    store: SQLiteStateStore, db: Path, call: object, named: str
) -> None:
    await _commit_items(store, "m1")
    before = dump_sqlite(db)
    with pytest.raises(InvalidInputError, match=named):
        await call(store)  # type: ignore[operator]
    assert dump_sqlite(db) == before


async def test_a_payload_nested_too_deeply_to_read_back_is_refused_on_commit(
    store: SQLiteStateStore, db: Path
) -> None:
    from affect_memory.kernel.protocols import OutboxItem

    deep: dict[str, object] = {}
    node = deep
    for _ in range(5_000):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    await _commit_one(store)
    before = dump_sqlite(db)
    items = [
        OutboxItem(id="fine", topic="memory"),
        OutboxItem(id="deep", topic="memory", payload=deep),
    ]
    async with store.transaction("c1") as transaction:
        with pytest.raises(InvalidInputError, match=r"outbox\[1\].*'deep'.*nested"):
            await transaction.commit(state=None, messages=(), outbox=items)
    assert dump_sqlite(db) == before


_SCHEMA_V1 = """
CREATE TABLE conversations (
    conversation_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')), content TEXT NOT NULL,
    timestamp TEXT NOT NULL);
CREATE INDEX messages_by_conversation ON messages (conversation_id, seq);
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, topic TEXT NOT NULL,
    payload TEXT NOT NULL, conversation_id TEXT NOT NULL,
    applied INTEGER NOT NULL DEFAULT 0 CHECK (applied IN (0, 1)));
CREATE INDEX outbox_pending ON outbox (topic, applied, seq);
INSERT INTO conversations VALUES
    ('old', '{"version": 1, "state": {"mood": {"valence": 0.25}}}', '2026-01-01T00:00:00+00:00');
INSERT INTO messages (conversation_id, role, content, timestamp)
    VALUES ('old', 'user', 'from v1', '2026-01-01T00:00:00+00:00');
INSERT INTO outbox (id, topic, payload, conversation_id, applied) VALUES
    ('done', 'memory', '{}', 'old', 1), ('owed', 'memory', '{"n": 1}', 'old', 0);
PRAGMA user_version = 1;
"""


def test_a_version_1_database_is_upgraded_in_place_and_keeps_its_rows(db: Path) -> None:
    connection = sqlite3.connect(db)
    connection.executescript(_SCHEMA_V1)
    connection.close()
    store = SQLiteStateStore(db)

    async def read() -> tuple[object, ...]:
        async with store.transaction("old") as transaction:
            state, messages = await transaction.load_state(), await transaction.load_transcript()
        pending = await store.pending_outbox("memory")
        assert await store.quarantine_outbox("owed", "checking the new column") is True
        return state, messages, pending

    try:
        state, messages, pending = asyncio.run(read())
    finally:
        store.close()
    assert state == AffectState(mood=Mood(valence=0.25))
    assert [m.content for m in messages] == ["from v1"]  # type: ignore[attr-defined]
    assert [item.id for item in pending] == ["owed"]  # type: ignore[attr-defined]
    assert _sql(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    SQLiteStateStore(db).close()  # opening an upgraded file again changes nothing
    assert _sql(db, "SELECT id, quarantine_reason FROM outbox ORDER BY seq") == [
        ("done", None),
        ("owed", "checking the new column"),
    ]
