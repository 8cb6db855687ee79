"""Erasing a user from a real state store (SQLite and PostgreSQL): their conversations'
state, transcript, turn history and outbox items go, in one transaction; the other user's
stay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.state.location import open_state_store
from tests.plugin.state.user_data import held, mentions, seed_conversations, state_location


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
