"""The behaviour every ``StateStore`` must show; subclass and provide ``make_store``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

import pytest

from affect_memory.kernel import AffectState, EmotionMap, InvalidInputError, Mood, StateStoreError
from affect_memory.kernel.protocols import Message, OutboxItem, StateStore

StoreFactory = Callable[[], StateStore]
WaitWatch = Callable[[StateStore, str], Awaitable[None]]
"""Called before anyone holds ``conversation``: an awaitable done once a turn of ``store`` waits
for it (blocked on the conversation's lock, not merely started)."""


def _state(valence: float = 0.25, thought: str | None = None) -> AffectState:
    return AffectState(
        mood=Mood(valence=valence, arousal=-0.1, dominance=0.05),
        occ_carry=EmotionMap({"joy": 0.4, "gratitude": 0.2}),
        carried_thought=thought,
        expectation="they said they would come back",
    )


def _messages(*contents: str, stamp: str | None = None) -> tuple[Message, ...]:
    roles = ("user", "assistant")
    return tuple(
        Message(role=roles[i % 2], content=text, timestamp=stamp) for i, text in enumerate(contents)
    )


async def _commit(store: StateStore, conversation: str, **kwargs: object) -> None:
    async with store.transaction(conversation) as transaction:
        await transaction.commit(**kwargs)  # type: ignore[arg-type]


async def _snapshot(store: StateStore, conversation: str) -> tuple[object, object]:
    async with store.transaction(conversation) as transaction:
        return await transaction.load_state(), await transaction.load_transcript()


class StateStoreContract:
    """Run against every store: in-memory, SQLite, and any future server-backed store."""

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        """A factory of stores; each call returns a handle on the same backing data."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> StateStore:
        return make_store()

    @pytest.fixture
    def watch_waits(self) -> WaitWatch:
        """How to see a turn of a store blocked on a conversation; each store has its own."""
        raise NotImplementedError

    async def test_a_new_conversation_has_no_state_and_no_messages(self, store: StateStore) -> None:
        assert await _snapshot(store, "new") == (None, ())

    async def test_a_commit_is_read_back_in_a_later_transaction(self, store: StateStore) -> None:
        state = _state(thought="ask about the garden")
        messages = _messages("hello", "hi there", stamp="2026-03-01T10:00:00+00:00")
        await _commit(store, "c1", state=state, messages=messages)
        loaded_state, loaded_messages = await _snapshot(store, "c1")
        assert loaded_state == state
        assert loaded_messages == messages

    async def test_the_state_round_trips_every_field(self, store: StateStore) -> None:
        state = _state(valence=-0.3333333333333333, thought='ünïcödé ✓ "quoted"\nline')
        await _commit(store, "c1", state=state, messages=())
        loaded, _ = await _snapshot(store, "c1")
        assert isinstance(loaded, AffectState)
        assert loaded.model_dump() == state.model_dump()

    async def test_a_state_of_none_keeps_the_committed_state(self, store: StateStore) -> None:
        await _commit(store, "c1", state=_state(0.5), messages=_messages("a", "b"))
        await _commit(store, "c1", state=None, messages=_messages("c"))
        state, messages = await _snapshot(store, "c1")
        assert state == _state(0.5)
        assert [m.content for m in messages] == ["a", "b", "c"]  # type: ignore[attr-defined]

    async def test_the_transcript_is_in_commit_order(self, store: StateStore) -> None:
        for turn in range(12):
            await _commit(store, "c1", state=None, messages=_messages(f"u{turn}", f"a{turn}"))
        _, messages = await _snapshot(store, "c1")
        expected = [text for turn in range(12) for text in (f"u{turn}", f"a{turn}")]
        assert [m.content for m in messages] == expected  # type: ignore[attr-defined]

    async def test_a_transcript_limit_returns_the_newest_messages_in_order(
        self, store: StateStore
    ) -> None:
        await _commit(store, "c1", state=None, messages=_messages(*"abcdef"))
        async with store.transaction("c1") as transaction:
            newest = await transaction.load_transcript(limit=4)
            everything = await transaction.load_transcript(limit=100)
        assert [m.content for m in newest] == ["c", "d", "e", "f"]
        assert [m.content for m in everything] == list("abcdef")

    @pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3"])
    async def test_a_bad_transcript_limit_is_refused(
        self, store: StateStore, limit: object
    ) -> None:
        async with store.transaction("c1") as transaction:
            with pytest.raises(InvalidInputError, match="limit"):
                await transaction.load_transcript(limit=limit)  # type: ignore[arg-type]

    async def test_unstamped_messages_get_a_zoned_utc_timestamp(self, store: StateStore) -> None:
        await _commit(store, "c1", state=None, messages=_messages("no stamp"))
        _, messages = await _snapshot(store, "c1")
        (message,) = messages  # type: ignore[misc]
        moment = datetime.fromisoformat(message.timestamp)
        assert moment.utcoffset() is not None and moment.utcoffset().total_seconds() == 0

    async def test_a_given_timestamp_is_kept_as_given(self, store: StateStore) -> None:
        stamp = "2026-03-01T10:00:00+02:00"
        await _commit(store, "c1", state=None, messages=_messages("x", stamp=stamp))
        _, messages = await _snapshot(store, "c1")
        assert messages[0].timestamp == stamp  # type: ignore[index]

    async def test_conversations_are_isolated(self, store: StateStore) -> None:
        await _commit(store, "a", state=_state(0.1), messages=_messages("for a"))
        await _commit(store, "b", state=_state(-0.1), messages=_messages("for b"))
        state_a, messages_a = await _snapshot(store, "a")
        state_b, messages_b = await _snapshot(store, "b")
        assert state_a == _state(0.1) and state_b == _state(-0.1)
        assert [m.content for m in messages_a] == ["for a"]  # type: ignore[attr-defined]
        assert [m.content for m in messages_b] == ["for b"]  # type: ignore[attr-defined]

    async def test_nothing_is_written_without_a_commit(self, store: StateStore) -> None:
        async with store.transaction("c1") as transaction:
            await transaction.load_state()
        assert await _snapshot(store, "c1") == (None, ())

    async def test_an_error_inside_the_transaction_writes_nothing(self, store: StateStore) -> None:
        await _commit(store, "c1", state=_state(0.2), messages=_messages("kept"))
        before = await _snapshot(store, "c1")
        with pytest.raises(RuntimeError, match="boom"):
            async with store.transaction("c1") as transaction:
                await transaction.load_state()
                raise RuntimeError("boom")
        assert await _snapshot(store, "c1") == before

    async def test_a_transaction_commits_at_most_once(self, store: StateStore) -> None:
        async with store.transaction("c1") as transaction:
            await transaction.commit(state=_state(), messages=_messages("one"))
            with pytest.raises(StateStoreError, match="already committed"):
                await transaction.commit(state=_state(0.9), messages=_messages("two"))
        state, messages = await _snapshot(store, "c1")
        assert state == _state() and [m.content for m in messages] == ["one"]  # type: ignore[attr-defined]

    async def test_a_closed_transaction_cannot_be_used(self, store: StateStore) -> None:
        async with store.transaction("c1") as transaction:
            pass
        with pytest.raises(StateStoreError, match="closed"):
            await transaction.commit(state=_state(), messages=())
        with pytest.raises(StateStoreError, match="closed"):
            await transaction.load_state()
        assert await _snapshot(store, "c1") == (None, ())

    @pytest.mark.parametrize(
        ("kwargs", "named"),
        [
            ({"state": {"mood": {}}, "messages": ()}, "state"),
            ({"state": None, "messages": "hello"}, "messages"),
            (
                {"state": None, "messages": (Message(role="user", content="ok"), "bad")},
                r"messages\[1\]",
            ),
            (
                {"state": None, "messages": (), "outbox": [{"id": "x", "topic": "t"}]},
                r"outbox\[0\]",
            ),
        ],
    )
    async def test_bad_commit_arguments_are_refused_and_nothing_is_written(
        self, store: StateStore, kwargs: dict[str, object], named: str
    ) -> None:
        await _commit(store, "c1", state=_state(0.3), messages=_messages("before"))
        before = await _snapshot(store, "c1")
        async with store.transaction("c1") as transaction:
            with pytest.raises(InvalidInputError, match=named):
                await transaction.commit(**kwargs)  # type: ignore[arg-type]
        assert await _snapshot(store, "c1") == before

    @pytest.mark.parametrize("conversation", ["", "   ", 7, None, "x" * 257])
    async def test_a_bad_conversation_id_is_refused(
        self, store: StateStore, conversation: object
    ) -> None:
        with pytest.raises(InvalidInputError, match="conversation_id"):
            async with store.transaction(conversation):  # type: ignore[arg-type]
                pass

    async def test_one_conversation_is_serialized(
        self, make_store: StoreFactory, watch_waits: WaitWatch
    ) -> None:
        first, second = make_store(), make_store()
        second_waits = watch_waits(second, "shared")
        events: list[str] = []
        entered = asyncio.Event()

        async def holder() -> None:
            async with first.transaction("shared") as transaction:
                events.append("first in")
                entered.set()
                async with asyncio.timeout(30):
                    await second_waits  # the follower is blocked on the conversation now
                await transaction.commit(state=_state(0.4), messages=_messages("first"))
                events.append("first out")

        async def follower() -> None:
            await entered.wait()
            async with second.transaction("shared") as transaction:
                events.append("second in")
                assert await transaction.load_state() == _state(0.4)
                await transaction.commit(state=None, messages=_messages("second"))

        await asyncio.gather(holder(), follower())
        assert events == ["first in", "first out", "second in"]
        _, messages = await _snapshot(first, "shared")
        assert [m.content for m in messages] == ["first", "second"]  # type: ignore[attr-defined]

    async def test_other_conversations_proceed_while_one_is_held(
        self, make_store: StoreFactory
    ) -> None:
        first, second = make_store(), make_store()
        release = asyncio.Event()
        held = asyncio.Event()
        events: list[str] = []

        async def slow() -> None:
            async with first.transaction("slow") as transaction:
                held.set()
                await release.wait()
                events.append("slow commits")
                await transaction.commit(state=None, messages=_messages("slow"))

        async def quick() -> None:
            await held.wait()
            async with second.transaction("quick") as transaction:
                await transaction.commit(state=None, messages=_messages("quick"))
            events.append("quick committed")
            release.set()

        await asyncio.wait_for(asyncio.gather(slow(), quick()), timeout=10)
        assert events == ["quick committed", "slow commits"]

    async def test_outbox_items_are_pending_in_order_per_topic(self, store: StateStore) -> None:
        items = [
            OutboxItem(id="m1", topic="memory", payload={"n": 1}),
            OutboxItem(id="r1", topic="reflect", payload={"text": "ünï"}),
            OutboxItem(id="m2", topic="memory", payload={"nested": {"list": [1, 2.5, None]}}),
        ]
        await _commit(store, "c1", state=None, messages=_messages("x"), outbox=items[:2])
        await _commit(store, "c2", state=None, messages=_messages("y"), outbox=items[2:])
        assert await store.pending_outbox("memory") == (items[0], items[2])
        assert await store.pending_outbox("reflect") == (items[1],)
        assert await store.pending_outbox("memory", limit=1) == (items[0],)
        assert await store.pending_outbox("unknown") == ()

    async def test_completed_outbox_items_are_no_longer_pending(self, store: StateStore) -> None:
        items = [OutboxItem(id=f"m{i}", topic="memory") for i in range(3)]
        await _commit(store, "c1", state=None, messages=(), outbox=items)
        await store.complete_outbox(["m0", "m2", "never-written"])
        assert await store.pending_outbox("memory") == (items[1],)
        await store.complete_outbox([])
        assert await store.pending_outbox("memory") == (items[1],)

    async def test_an_outbox_id_written_twice_is_kept_once(self, store: StateStore) -> None:
        first = OutboxItem(id="same", topic="memory", payload={"v": 1})
        again = OutboxItem(id="same", topic="memory", payload={"v": 2})
        await _commit(store, "c1", state=None, messages=(), outbox=[first, again])
        await _commit(store, "c1", state=None, messages=(), outbox=[again])
        assert await store.pending_outbox("memory") == (first,)
        await store.complete_outbox(["same"])
        await _commit(store, "c1", state=None, messages=(), outbox=[again])
        assert await store.pending_outbox("memory") == ()

    async def test_the_outbox_commits_with_the_turn_or_not_at_all(self, store: StateStore) -> None:
        item = OutboxItem(id="m1", topic="memory")
        with pytest.raises(RuntimeError):
            async with store.transaction("c1") as transaction:
                await transaction.load_state()
                raise RuntimeError("before commit")
        assert await store.pending_outbox("memory") == ()
        async with store.transaction("c1") as transaction:
            await transaction.commit(state=_state(), messages=_messages("x"), outbox=[item])
        assert await store.pending_outbox("memory") == (item,)

    @pytest.mark.parametrize("limit", [0, -5, True, 2.0])
    async def test_a_bad_outbox_limit_is_refused(self, store: StateStore, limit: object) -> None:
        with pytest.raises(InvalidInputError, match="limit"):
            await store.pending_outbox("memory", limit=limit)  # type: ignore[arg-type]

    async def test_a_nested_transaction_on_the_same_conversation_raises(
        self, make_store: StoreFactory
    ) -> None:
        first, second = make_store(), make_store()
        async with first.transaction("c1") as transaction:
            with pytest.raises(StateStoreError, match="already holds"):
                async with second.transaction("c1"):
                    pass
            async with second.transaction("other") as other:
                await other.commit(state=None, messages=_messages("nested, other conversation"))
            await transaction.commit(state=None, messages=_messages("outer"))
        _, messages = await _snapshot(first, "c1")
        assert [m.content for m in messages] == ["outer"]  # type: ignore[attr-defined]
