"""The in-memory store keeps the store contract and hands out copies, never its own data."""

from __future__ import annotations

import pytest

from affect_memory.kernel import AffectState, Mood
from affect_memory.kernel.adapters import InMemoryStateStore
from affect_memory.kernel.protocols import Message
from tests.contracts.state_store_contract import StateStoreContract, StoreFactory


class TestInMemoryStateStore(StateStoreContract):
    @pytest.fixture
    def make_store(self) -> StoreFactory:
        store = InMemoryStateStore()
        return lambda: store


async def test_loaded_states_are_fresh_copies() -> None:
    store = InMemoryStateStore()
    state = AffectState(mood=Mood(valence=0.5))
    async with store.transaction("c") as transaction:
        await transaction.commit(state=state, messages=[Message(role="user", content="hi")])
    async with store.transaction("c") as transaction:
        first = await transaction.load_state()
        second = await transaction.load_state()
    assert first == state and second == state
    assert first is not state and first is not second


async def test_the_caller_list_of_messages_is_copied() -> None:
    store = InMemoryStateStore()
    messages = [Message(role="user", content="hi")]
    async with store.transaction("c") as transaction:
        await transaction.commit(state=None, messages=messages)
    messages.append(Message(role="assistant", content="added later"))
    async with store.transaction("c") as transaction:
        assert [m.content for m in await transaction.load_transcript()] == ["hi"]
