"""Each state store (a real SQLite file, a real PostgreSQL schema) keeps the mood and emotions
after every committed turn, in the turn's own commit; lists and reads a user's conversations to
that user only; claims a conversation for one user; and upgrades an older file or schema."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from affect_memory.kernel import AffectState, Mood
from affect_memory.kernel.adapters import ScriptedModel
from affect_memory.kernel.appraisal import DEFAULT_AFFECT_DYNAMICS
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.errors import CorruptStateError, StateStoreError
from affect_memory.kernel.protocols import GateResult, Message, OutboxItem, TurnResult
from affect_memory.state.location import open_state_store
from affect_memory.state.sqlite import SCHEMA_VERSION, SQLiteStateStore
from affect_memory.state.turn_history import ConversationHistory
from tests.contracts.snapshots import dump_sqlite
from tests.plugin.state.user_data import Store, held, state_location

KINDS = ["sqlite", "postgresql"]
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CARRY_FLOOR = DEFAULT_AFFECT_DYNAMICS.carry_floor


@pytest.fixture(params=KINDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, str, str]]:
    """``(store, kind, where)`` of a fresh store of each kind, closed afterwards."""
    with state_location(request.param, tmp_path) as (url, where):
        store = open_state_store(url)
        try:
            yield store, request.param, where
        finally:
            store.close()


def _clock(minutes: list[int]) -> Any:
    """A clock that steps a minute per turn from ``START``."""

    def now() -> datetime:
        minutes.append(len(minutes))
        return START + timedelta(minutes=minutes[-1])

    return now


async def _three_turns(store: Store) -> tuple[TurnResult, ...]:
    """A answered turn, a silent one (the gate declines), and another answered one."""
    model = ScriptedModel(
        gates=[
            GateResult(intent="CURIOSITY"),
            GateResult(intent="CASUAL", should_respond=False),
            GateResult(intent="VULNERABILITY"),
        ],
        replies=[("what ", "a question"), ("I am here",)],
    )
    engine = AffectEngine(
        model=model, store=store, conversation_id="talk", user_id="ann", clock=_clock([])
    )
    assert await store.claim_conversation("talk", "ann") is True
    return (
        await engine.turn("how do tides work?"),
        await engine.turn("hm"),
        await engine.turn("I feel low today"),
    )


def _pad(mood: Mood | None) -> tuple[float, float, float] | None:
    return None if mood is None else (mood.valence, mood.arousal, mood.dominance)


def _carried(result: TurnResult) -> dict[str, float]:
    """The turn's emotions the state carries on: those above the carry floor."""
    return {name: value for name, value in result.emotions.items() if value > CARRY_FLOOR}


def test_both_stores_offer_the_history(opened: tuple[Store, str, str]) -> None:
    assert isinstance(opened[0], ConversationHistory)


async def test_every_turn_reads_back_with_the_mood_and_emotions_after_it(
    opened: tuple[Store, str, str],
) -> None:
    store = opened[0]
    first, silent, third = await _three_turns(store)
    turns = await store.conversation_turns("ann", "talk")
    assert turns is not None
    assert [(t.index, t.user, t.assistant) for t in turns] == [
        (0, "how do tides work?", "what a question"),
        (1, "hm", None),
        (2, "I feel low today", "I am here"),
    ]
    assert [t.timestamp for t in turns] == [
        (START + timedelta(minutes=m)).isoformat() for m in range(3)
    ]
    for turn, result in zip(turns, (first, silent, third), strict=True):
        assert _pad(turn.mood) == pytest.approx(_pad(result.mood), abs=1e-12)
    assert first.mood != third.mood, "the turns never moved the mood, so nothing was tested"
    assert turns[0].emotions == pytest.approx(_carried(first), abs=1e-12)
    assert turns[1].emotions == turns[0].emotions  # a silent turn keeps the state it found
    assert turns[2].emotions == pytest.approx(_carried(third), abs=1e-12)
    assert turns[2].emotions != turns[0].emotions
    async with store.transaction("talk") as transaction:
        state = await transaction.load_state()
    assert state is not None
    assert _pad(turns[2].mood) == pytest.approx(_pad(state.mood), abs=1e-12)
    assert turns[2].emotions == pytest.approx(dict(state.occ_carry), abs=1e-12)


async def test_a_user_lists_and_reads_only_their_own_conversations(
    opened: tuple[Store, str, str],
) -> None:
    store = opened[0]
    await _three_turns(store)
    assert await store.claim_conversation("bob-chat", "bob") is True
    listed = await store.conversations("ann")
    assert [(c.conversation_id, c.turns, c.updated_at) for c in listed] == [
        ("talk", 3, (START + timedelta(minutes=2)).isoformat())
    ]
    bobs = await store.conversations("bob")
    assert [(c.conversation_id, c.turns, c.updated_at) for c in bobs] == [("bob-chat", 0, None)]
    assert await store.conversation_turns("bob", "talk") is None
    assert await store.conversation_turns("ann", "bob-chat") is None
    assert await store.conversation_turns("bob", "bob-chat") == ()
    assert await store.conversation_turns("ann", "never-made") is None
    assert await store.conversations("carol") == ()


async def test_a_claim_takes_a_new_conversation_and_never_another_users(
    opened: tuple[Store, str, str],
) -> None:
    store, kind, where = opened
    assert await store.claim_conversation("c1", "ann") is True
    assert await store.claim_conversation("c1", "ann") is True  # again: still hers
    async with store.transaction("orphan") as transaction:  # turns, and nobody's
        await transaction.commit(state=AffectState(), messages=[Message(role="user", content="x")])
    before = held(kind, where)
    assert await store.claim_conversation("c1", "bob") is False
    assert await store.claim_conversation("orphan", "bob") is False
    assert held(kind, where) == before
    assert before["conversation_users"] == [("c1", "ann")]


async def test_two_users_claiming_one_new_conversation_at_once_get_it_once(
    opened: tuple[Store, str, str],
) -> None:
    store, kind, where = opened
    for round_number in range(5):
        conversation = f"race-{round_number}"
        won = await asyncio.gather(
            store.claim_conversation(conversation, "ann"),
            store.claim_conversation(conversation, "bob"),
        )
        assert sorted(won) == [False, True]
        owners = [user for c, user in held(kind, where)["conversation_users"] if c == conversation]
        assert owners == [("ann", "bob")[won.index(True)]]


async def test_each_user_message_of_a_commit_is_one_turn_and_a_commit_without_one_is_none(
    opened: tuple[Store, str, str],
) -> None:
    store, kind, where = opened
    await store.link_user("bulk", "ann")
    state = AffectState(mood=Mood(valence=0.4, arousal=-0.2, dominance=0.1))
    async with store.transaction("bulk") as transaction:
        await transaction.commit(
            state=state,
            messages=[
                Message(role="user", content="one"),
                Message(role="assistant", content="reply one"),
                Message(role="user", content="two"),
            ],
        )
    async with store.transaction("bulk") as transaction:
        await transaction.commit(state=AffectState(), messages=[])
    turns = await store.conversation_turns("ann", "bulk")
    assert turns is not None
    assert [(t.user, t.assistant) for t in turns] == [("one", "reply one"), ("two", None)]
    for turn in turns:  # both after the one commit's state; the empty commit added no turn
        assert _pad(turn.mood) == pytest.approx(_pad(state.mood), abs=1e-12)
    assert held(kind, where)["turn_affect"] == [("bulk",), ("bulk",)]


async def test_a_commit_that_fails_after_its_history_row_leaves_no_row(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SQLiteStateStore(db)
    try:
        async with store.transaction("c1") as transaction:
            await transaction.commit(
                state=AffectState(), messages=[Message(role="user", content="kept")]
            )
        connection = sqlite3.connect(db)
        connection.execute(
            "CREATE TRIGGER fault AFTER INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'injected'); END"
        )
        connection.commit()
        connection.close()
        before = dump_sqlite(db)
        async with store.transaction("c1") as transaction:
            with pytest.raises(StateStoreError, match="injected"):
                await transaction.commit(
                    state=AffectState(mood=Mood(valence=0.9)),
                    messages=[Message(role="user", content="lost")],
                    outbox=[OutboxItem(id="o1", topic="memory")],
                )
        assert dump_sqlite(db) == before
    finally:
        store.close()


def _assert_old_then_new(turns: Any, version: str, result: TurnResult) -> None:
    """A turn from before the upgrade reads without a mood; the turn after it, with its own."""
    assert turns is not None
    assert [(t.user, t.assistant, t.mood, dict(t.emotions)) for t in turns[:1]] == [
        (f"from {version}", f"answered in {version}", None, {})
    ]
    assert [(t.index, t.user, t.assistant) for t in turns[1:]] == [
        (1, "after the upgrade", "new reply")
    ]
    assert _pad(turns[1].mood) == pytest.approx(_pad(result.mood), abs=1e-12)
    assert turns[1].emotions == pytest.approx(_carried(result), abs=1e-12)


_VERSION_3 = """
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
    applied INTEGER NOT NULL DEFAULT 0 CHECK (applied IN (0, 1)),
    quarantine_reason TEXT, quarantined_at TEXT);
CREATE INDEX outbox_pending ON outbox (topic, applied, seq);
CREATE TABLE conversation_users (conversation_id TEXT NOT NULL, user_id TEXT NOT NULL,
    PRIMARY KEY (conversation_id, user_id));
CREATE INDEX conversation_users_by_user ON conversation_users (user_id);
INSERT INTO conversations VALUES
    ('old', '{"version": 1, "state": {"mood": {"valence": 0.25}}}', '2026-01-01T00:00:00+00:00');
INSERT INTO messages (conversation_id, role, content, timestamp) VALUES
    ('old', 'user', 'from v3', '2026-01-01T00:00:00+00:00'),
    ('old', 'assistant', 'answered in v3', '2026-01-01T00:00:00+00:00');
INSERT INTO conversation_users VALUES ('old', 'ann');
PRAGMA user_version = 3;
"""


async def _turn_after_upgrade(store: Any) -> tuple[TurnResult, Any]:
    """One new turn of conversation ``old`` in the upgraded ``store`` (closed after), and how
    ann's conversation then reads back."""
    try:
        engine = AffectEngine(
            model=ScriptedModel(replies=[("new reply",)]), store=store, conversation_id="old"
        )
        result = await engine.turn("after the upgrade")
        return result, await store.conversation_turns("ann", "old")
    finally:
        store.close()


async def test_a_version_3_file_upgrades_and_its_old_turns_read_without_a_mood(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    connection = sqlite3.connect(db)
    connection.executescript(_VERSION_3)
    connection.close()
    result, turns = await _turn_after_upgrade(SQLiteStateStore(db))
    assert SCHEMA_VERSION == 4
    connection = sqlite3.connect(db)
    try:
        assert connection.execute("PRAGMA user_version").fetchone() == (4,)
    finally:
        connection.close()
    _assert_old_then_new(turns, "v3", result)
    before = dump_sqlite(db)
    SQLiteStateStore(db).close()  # opening an upgraded file again changes nothing
    assert dump_sqlite(db) == before


async def test_a_version_2_postgres_schema_upgrades_and_its_old_turns_read_without_a_mood(
    tmp_path: Path,
) -> None:
    from tests.plugin.state.postgres_fixture import run_sql

    with state_location("postgresql", tmp_path) as (url, where):
        server, schema = where.split("#")
        open_state_store(url).close()
        # Undo migration 3 exactly: the schema is then as version 2 left it.
        run_sql(server, f'DROP TABLE "{schema}".turn_affect')
        run_sql(server, f'DELETE FROM "{schema}".schema_version WHERE version = 3')
        run_sql(
            server,
            f'INSERT INTO "{schema}".messages VALUES '
            "('old', 1, 'user', 'from v2', '2026-01-01T00:00:00+00:00'), "
            "('old', 2, 'assistant', 'answered in v2', '2026-01-01T00:00:00+00:00')",
        )
        run_sql(server, f"INSERT INTO \"{schema}\".conversation_users VALUES ('old', 'ann')")
        result, turns = await _turn_after_upgrade(open_state_store(url))
        versions = run_sql(server, f'SELECT version FROM "{schema}".schema_version ORDER BY 1')
    assert versions == [(1,), (2,), (3,)]
    _assert_old_then_new(turns, "v2", result)


def test_a_stored_history_row_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SQLiteStateStore(db)
    try:

        async def seed() -> None:
            await store.link_user("c1", "ann")
            async with store.transaction("c1") as transaction:
                await transaction.commit(
                    state=AffectState(), messages=[Message(role="user", content="hi")]
                )

        asyncio.run(seed())
        connection = sqlite3.connect(db)
        connection.execute("UPDATE turn_affect SET emotions = ?", (json.dumps({"joy": 7}),))
        connection.commit()
        connection.close()
        with pytest.raises(CorruptStateError, match=r"history of message 1 of conversation 'c1'"):
            asyncio.run(store.conversation_turns("ann", "c1"))
    finally:
        store.close()


def test_two_stores_on_one_file_claiming_one_conversation_at_once_never_both_win(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    stores = [SQLiteStateStore(db), SQLiteStateStore(db)]
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def claim(store: SQLiteStateStore, user: str) -> None:
        barrier.wait()
        results.append(asyncio.run(store.claim_conversation("contested", user)))

    threads = [
        threading.Thread(target=claim, args=(store, user))
        for store, user in zip(stores, ("ann", "bob"), strict=True)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for store in stores:
            store.close()
    assert sorted(results) == [False, True]
