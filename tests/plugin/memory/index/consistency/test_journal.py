"""The journal records what a write is about to do, tells the announced row from the one it
replaces, and hands back exactly the entries due, per user, until they are settled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from affect_memory.memory.index.consistency.documents import text_hash
from affect_memory.memory.index.consistency.journal import (
    INTENT_KEYS,
    Entry,
    announce,
    defer,
    entries,
    matches,
    settle,
    write_intent,
)
from affect_memory.memory.index.storage.backend import Backend
from affect_memory.memory.index.storage.opening import IndexTarget, open_backend
from affect_memory.memory.records import MemoryRecord

ANN, BOB = 11, 12


def _record(**fields: Any) -> MemoryRecord:
    return MemoryRecord.model_validate(
        {
            "id": "m1",
            "text": "I keep bees on the roof.",
            "user_id": "ann",
            "timestamp": "2025-03-01T12:00:00Z",
            **fields,
        }
    )


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    opened = open_backend(IndexTarget("file", path=tmp_path / "index.sqlite3"), lock_timeout=5)
    try:
        yield opened
    finally:
        opened.close()


def _pending(backend: Backend, key: int, due_by: float | None = None) -> list[Entry]:
    return backend.read(lambda tx: entries(tx, key, due_by=due_by))


# -- intents ------------------------------------------------------------------------------------


def test_a_write_intent_is_the_text_hash_and_the_records_own_metadata() -> None:
    record = _record(significance=0.7, recall_count=3, last_recalled_at="2025-04-01T00:00:00Z")
    intent = write_intent(record)
    metadata = record.to_metadata()
    assert intent == {
        "text_hash": text_hash(record.text),
        "meta": {key: metadata[key] for key in INTENT_KEYS},
    }
    assert set(write_intent(_record())["meta"]) == set(INTENT_KEYS) - {"last_recalled_at"}


def test_the_announced_row_matches_and_the_row_it_replaces_does_not() -> None:
    announced = _record(recall_count=2)
    intent = write_intent(announced)
    stored = announced.to_metadata()
    assert matches(intent, announced.text, stored)
    assert matches(intent, announced.text, {**stored, "agent_id": "extra keys do not matter"})
    assert not matches(intent, "I keep wasps on the roof.", stored)  # another text
    assert not matches(intent, announced.text, {**stored, "recall_count": 0})  # older counts
    without = {key: value for key, value in stored.items() if key != "significance"}
    assert not matches(intent, announced.text, without)
    assert not matches(intent, None, stored)
    assert not matches(intent, announced.text, None)


def test_a_value_of_another_type_is_another_row() -> None:
    intent = write_intent(_record(recall_count=1))
    stored = _record(recall_count=1).to_metadata()
    assert not matches(intent, _record().text, {**stored, "recall_count": 1.0})
    assert not matches(intent, _record().text, {**stored, "episode": 0})


# -- entries ------------------------------------------------------------------------------------


def test_entries_are_per_user_by_id_and_a_new_announcement_replaces_an_old_one(
    backend: Backend,
) -> None:
    first = write_intent(_record())
    backend.write(lambda tx: announce(tx, ANN, "write", [("m2", first), ("m1", first)], due=0.0))
    backend.write(lambda tx: announce(tx, BOB, "forget", [("m1", {})], due=0.0))
    assert _pending(backend, ANN) == [Entry("m1", "write", first), Entry("m2", "write", first)]
    backend.write(lambda tx: announce(tx, ANN, "resync", [("m2", {})], due=0.0))
    assert _pending(backend, ANN) == [Entry("m1", "write", first), Entry("m2", "resync", {})]
    assert _pending(backend, BOB) == [Entry("m1", "forget", {})]


def test_only_due_entries_are_handed_out_and_defer_moves_them_on(backend: Backend) -> None:
    backend.write(lambda tx: announce(tx, ANN, "write", [("m1", {}), ("m2", {})], due=0.0))
    assert [e.memory_id for e in _pending(backend, ANN, due_by=0.0)] == ["m1", "m2"]
    backend.write(lambda tx: defer(tx, ANN, ["m2"], due=100.0))
    assert [e.memory_id for e in _pending(backend, ANN, due_by=99.5)] == ["m1"]
    assert [e.memory_id for e in _pending(backend, ANN, due_by=100.0)] == ["m1", "m2"]
    assert [e.memory_id for e in _pending(backend, ANN)] == ["m1", "m2"]  # due or not


def test_settling_removes_only_the_ids_named_of_that_user(backend: Backend) -> None:
    ids = [f"m{i}" for i in range(1200)]  # past one statement's chunk of parameters
    backend.write(lambda tx: announce(tx, ANN, "forget", [(i, {}) for i in ids], due=0.0))
    backend.write(lambda tx: announce(tx, BOB, "forget", [("m1", {})], due=0.0))
    backend.write(lambda tx: settle(tx, ANN, ids[1:]))
    assert _pending(backend, ANN) == [Entry("m0", "forget", {})]
    assert _pending(backend, BOB) == [Entry("m1", "forget", {})]
