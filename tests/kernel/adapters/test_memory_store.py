"""The in-memory store keeps the store contract and hands out copies, never its own data."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Literal

import pytest

from affect_memory.kernel import AffectState, Mood
from affect_memory.kernel.adapters import InMemoryStateStore
from affect_memory.kernel.protocols import Message, StateStore
from tests.contracts.state_store_contract import StateStoreContract, StoreFactory, WaitWatch


class _WatchedLock(asyncio.Lock):
    """A conversation lock that sets ``waiting`` whenever an acquirer finds it held."""

    def __init__(self, waiting: asyncio.Event) -> None:
        super().__init__()
        self._waiting = waiting

    async def acquire(self) -> Literal[True]:
        if self.locked():
            self._waiting.set()
        return await super().acquire()


def watch_waits(store: StateStore, conversation: str) -> Awaitable[None]:
    """Done once a turn of the in-memory ``store`` finds ``conversation`` held and waits."""
    assert isinstance(store, InMemoryStateStore)
    waiting = asyncio.Event()
    store._locks[conversation] = _WatchedLock(waiting)  # before anyone holds it
    return waiting.wait()


class TestInMemoryStateStore(StateStoreContract):
    @pytest.fixture
    def make_store(self) -> StoreFactory:
        store = InMemoryStateStore()
        return lambda: store

    @pytest.fixture
    def watch_waits(self) -> WaitWatch:
        return watch_waits


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
