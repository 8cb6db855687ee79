"""Replaying owed memory writes: a poisoned outbox item is set aside by id, the rest apply once."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from affect_memory.errors import StoreUnavailableError
from affect_memory.kernel import AffectState, EmotionMap, Message, TurnRecord
from affect_memory.kernel.adapters import InMemoryStateStore
from affect_memory.kernel.protocols import OutboxItem, StateStore
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.turns.effects import MEMORY_TOPIC, MemoryTurnEffects
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from affect_memory.state.sqlite import SQLiteStateStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _turn(n: int) -> TurnRecord:
    stamp = (NOW + timedelta(minutes=n)).isoformat()
    return TurnRecord(
        conversation_id="alice-chat",
        turn_time=NOW + timedelta(minutes=n),
        user_id="alice",
        message=Message(role="user", content=f"My favourite number is {n}.", timestamp=stamp),
        reply=Message(role="assistant", content="Noted.", timestamp=stamp),
        intent="CASUAL",
        state=AffectState(),
        active_emotions=EmotionMap({"joy": 0.3}),
    )


@pytest.fixture
def memory(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> Iterator[ChromaMemory]:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as opened:
        yield opened


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStateStore]:
    opened = SQLiteStateStore(db)
    yield opened
    opened.close()


async def _owe(store: StateStore, effects: MemoryTurnEffects, *turns: int) -> list[str]:
    """Commit one outbox item per turn, as the engine's commit would; their ids in order."""
    items = [item for n in turns for item in effects.plan(_turn(n))]
    async with store.transaction("alice-chat") as transaction:
        await transaction.commit(state=None, messages=(), outbox=items)
    return [item.id for item in items]


def _set_payload(db: Path, item_id: str, payload: str) -> None:
    connection = sqlite3.connect(db)
    with connection:
        connection.execute("UPDATE outbox SET payload = ? WHERE id = ?", (payload, item_id))
    connection.close()


def _payload(db: Path, item_id: str) -> dict[str, object]:
    connection = sqlite3.connect(db)
    ((text,),) = connection.execute("SELECT payload FROM outbox WHERE id = ?", (item_id,))
    connection.close()
    loaded: dict[str, object] = json.loads(text)
    return loaded


async def test_a_non_json_outbox_row_does_not_stop_the_replay(
    memory: ChromaMemory, store: SQLiteStateStore, db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    effects = MemoryTurnEffects(memory)
    _, broken, _ = await _owe(store, effects, 1, 2, 3)
    _set_payload(db, broken, "{this is not json")
    report = await effects.replay_pending(store)
    assert (report.applied, report.failed) == (2, 0)
    assert memory.count("alice") == 2
    (aside,) = await store.quarantined_outbox(MEMORY_TOPIC)
    assert aside.id == broken and "not valid JSON" in aside.reason
    assert repr(broken) in caplog.text
    again = await effects.replay_pending(store)
    assert (again.applied, again.failed, again.quarantined) == (0, 0, ())
    assert memory.count("alice") == 2  # each good write applied exactly once


def _drop_turn_id(payload: dict[str, object]) -> None:
    del payload["turn_id"]


def _drop_everything(payload: dict[str, object]) -> None:
    payload.clear()


def _refused_record(payload: dict[str, object]) -> None:
    record = payload["new_record"]
    assert isinstance(record, dict)
    record["significance"] = 5


def _recalled_not_a_list(payload: dict[str, object]) -> None:
    payload["recalled_ids"] = 42


def _record_not_an_object(payload: dict[str, object]) -> None:
    payload["new_record"] = "just a string"


@pytest.mark.parametrize(
    "poison",
    [_drop_turn_id, _drop_everything, _refused_record, _recalled_not_a_list, _record_not_an_object],
)
async def test_a_payload_that_can_never_apply_is_quarantined_and_later_items_apply(
    memory: ChromaMemory,
    store: SQLiteStateStore,
    db: Path,
    caplog: pytest.LogCaptureFixture,
    poison: object,
) -> None:
    effects = MemoryTurnEffects(memory)
    poisoned, *_ = await _owe(store, effects, 1, 2, 3)
    payload = _payload(db, poisoned)
    poison(payload)  # type: ignore[operator]
    _set_payload(db, poisoned, json.dumps(payload))
    report = await effects.replay_pending(store)
    assert (report.applied, report.failed) == (2, 0)  # before: 0 applied, 1 failed, 2 stuck
    assert report.quarantined == (poisoned,)
    assert memory.count("alice") == 2
    assert await store.pending_outbox(MEMORY_TOPIC) == ()
    (aside,) = await store.quarantined_outbox()
    assert aside.id == poisoned and aside.conversation_id == "alice-chat"
    assert poisoned in caplog.text and "quarantined" in caplog.text
    caplog.clear()
    assert await effects.replay_pending(store) == type(report)(applied=0, failed=0)
    assert poisoned not in caplog.text  # never retried on its own


async def test_a_requeued_item_applies_once_it_is_fixed(
    memory: ChromaMemory, store: SQLiteStateStore, db: Path
) -> None:
    effects = MemoryTurnEffects(memory)
    (item_id,) = await _owe(store, effects, 1)
    payload = _payload(db, item_id)
    _set_payload(db, item_id, json.dumps({**payload, "turn_id": None}))
    assert (await effects.replay_pending(store)).quarantined == (item_id,)
    _set_payload(db, item_id, json.dumps(payload))  # the operator repairs the row
    assert await store.requeue_outbox([item_id]) == 1
    assert (await effects.replay_pending(store)).applied == 1
    assert memory.count("alice") == 1


class DownAfterFirst(MemoryTurnEffects):
    """Memory effects whose Chroma goes down after the first application attempt."""

    def __init__(self, memory: ChromaMemory) -> None:
        super().__init__(memory)
        self.attempts = 0
        self.down = True

    async def apply(self, items: Sequence[OutboxItem]) -> None:
        self.attempts += 1
        if self.attempts > 1 and self.down:
            raise StoreUnavailableError("cannot update recalled memories: connection refused")
        await super().apply(items)


async def test_an_outage_still_stops_the_replay_in_order_after_a_poisoned_item(
    memory: ChromaMemory, store: SQLiteStateStore, db: Path
) -> None:
    effects = DownAfterFirst(memory)
    poisoned, second, third = await _owe(store, effects, 1, 2, 3)
    _set_payload(db, poisoned, "{}")
    report = await effects.replay_pending(store)
    assert [item.id for item in await store.pending_outbox(MEMORY_TOPIC)] == [second, third]
    assert (report.applied, report.failed, report.quarantined) == (0, 1, (poisoned,))
    effects.down = False
    assert (await effects.replay_pending(store)).applied == 2
    assert memory.count("alice") == 2


async def test_a_store_that_cannot_quarantine_skips_the_item_and_goes_on(
    memory: ChromaMemory, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryStateStore()
    effects = MemoryTurnEffects(memory)
    good = [item for n in (2, 3) for item in effects.plan(_turn(n))]
    bad = OutboxItem(id="poisoned-item", topic=MEMORY_TOPIC, payload={"recalled_ids": []})
    async with store.transaction("alice-chat") as transaction:
        await transaction.commit(state=None, messages=(), outbox=[bad, *good])
    report = await effects.replay_pending(store, batch=1)  # the skipped item fills a batch
    assert (report.applied, report.failed) == (2, 0)
    assert report.quarantined == ("poisoned-item",)
    assert "poisoned-item" in caplog.text and "skipped" in caplog.text
    assert [item.id for item in await store.pending_outbox(MEMORY_TOPIC)] == ["poisoned-item"]
    again = await effects.replay_pending(store, batch=1)
    assert (again.applied, again.quarantined) == (0, ("poisoned-item",))
    assert memory.count("alice") == 2


@pytest.mark.parametrize("batch", [0, -1, True, 1.5])
async def test_a_bad_batch_size_is_refused(
    memory: ChromaMemory, store: SQLiteStateStore, batch: object
) -> None:
    from affect_memory.kernel import InvalidInputError

    with pytest.raises(InvalidInputError, match="batch"):
        await MemoryTurnEffects(memory).replay_pending(store, batch=batch)  # type: ignore[arg-type]
