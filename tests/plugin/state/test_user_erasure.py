"""Erasing a user from a real state store (SQLite and PostgreSQL): their conversations'
state, transcript, turn history and outbox items go, in one transaction; the other user's
stay."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import AffectState, Mood
from affect_memory.kernel.protocols import Message
from affect_memory.state.location import open_state_store
from affect_memory.state.postgres_sessions import conversation_lock_key
from tests.plugin.state.postgres_fixture import run_sql
from tests.plugin.state.user_data import (
    held,
    memory_item,
    mentions,
    seed_conversations,
    state_location,
)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_erase_user_removes_their_conversations_and_items_and_keeps_the_other_users(
    kind: str, tmp_path: Path
) -> None:
    with state_location(kind, tmp_path) as (url, where):
        store = open_state_store(url)
        try:
            asyncio.run(seed_conversations(store))
            before = held(kind, where)
            assert mentions(before, "ann") and mentions(before, "bob")
            assert ("ann-2", "ann") in before["conversation_users"]
            assert before["turn_affect"] == [
                ("ann-1",), ("ann-2",), ("bob-1",), ("team",), ("team",)
            ]
            erased = asyncio.run(store.erase_user("ann"))
            assert erased.conversations == ("ann-1", "ann-2", "team")
            assert erased.messages == 4 and erased.outbox_items == 3
            after = held(kind, where)
            assert mentions(after, "ann") == []
            assert after["conversations"] == [("bob-1",)]
            assert after["messages"] == [("bob-1", "bob says hi")]
            assert after["outbox"] == [("b1-memory", "bob-1")]
            assert after["conversation_users"] == [("bob-1", "bob")]
            assert after["turn_affect"] == [("bob-1",)]
            again = asyncio.run(store.erase_user("ann"))
            assert (again.conversations, again.messages, again.outbox_items) == ((), 0, 0)
            assert held(kind, where) == after

            async def reopened_conversation_starts_empty() -> None:
                async with store.transaction("ann-1") as transaction:
                    assert await transaction.load_state() is None
                    assert await transaction.load_transcript(limit=5) == ()

            asyncio.run(reopened_conversation_starts_empty())
        finally:
            store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_erase_user_refuses_a_bad_user_id_naming_it(kind: str, tmp_path: Path) -> None:
    with state_location(kind, tmp_path) as (url, _):
        store = open_state_store(url)
        try:
            for bad in ("", "a\x00b", 7):
                with pytest.raises(InvalidInputError, match="user_id"):
                    asyncio.run(store.erase_user(bad))  # type: ignore[arg-type]
        finally:
            store.close()


async def _until_its_lock_is_awaited(url: str, key: int) -> None:
    """Return once a session waits on the advisory lock ``key`` (at most 30 s)."""
    deadline = time.monotonic() + 30.0
    unsigned = key % 2**64  # pg_locks shows a bigint key as its high and low 32 bits
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1"
    )
    while not run_sql(url, waiting, (unsigned >> 32, unsigned & 0xFFFFFFFF))[0][0]:
        assert time.monotonic() < deadline, "nobody waited on the conversation's lock"
        await asyncio.sleep(0.01)


async def _erase_during_a_turn(store: Any, url: str) -> Any:
    await seed_conversations(store)
    key = conversation_lock_key(store.schema, "ann-1")
    async with store.transaction("ann-1") as transaction:
        await transaction.load_state()
        erasing = asyncio.ensure_future(store.erase_user("ann"))
        await _until_its_lock_is_awaited(url, key)  # the erasure waits for this turn
        assert not erasing.done()
        await transaction.commit(
            state=AffectState(mood=Mood(valence=0.4)),
            messages=[Message(role="user", content="ann in flight")],
            outbox=(memory_item("a3", "ann"),),
        )
    return await erasing


def test_erasing_waits_for_a_turn_in_flight_and_erases_what_it_committed(tmp_path: Path) -> None:
    """PostgreSQL: a turn holding one of the user's conversations when the erasure starts
    commits first and is erased with the rest, rather than writing it back afterwards."""
    with state_location("postgresql", tmp_path) as (url, where):
        store = open_state_store(url)
        try:
            erased = asyncio.run(_erase_during_a_turn(store, url.split("?")[0]))
            assert erased.conversations == ("ann-1", "ann-2", "team")
            after = held("postgresql", where)
            assert mentions(after, "ann") == [] and after["conversations"] == [("bob-1",)]
        finally:
            store.close()
