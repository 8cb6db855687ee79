"""A committed turn's writes: checked whole before anything is written, counts moved once per
turn and only forward in time, the user's message inserted if absent or, when asked, replaced.

Applying the same turn twice is the store contract's (``tests/contracts/memory_contract.py``);
here a fixed embedder keeps the store fast (no model).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.store import ChromaMemory
from tests.plugin.memory.hashing_embedder import HashingEmbedder

STAMP = "2025-03-01T12:00:00Z"


def note(ident: str, text: str, user: str = "ann", **fields: Any) -> dict[str, Any]:
    return {"id": ident, "text": text, "user_id": user, "timestamp": STAMP, **fields}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ChromaMemory]:
    with ChromaMemory(tmp_path / "chroma", embedder=HashingEmbedder(), progress=False) as opened:
        opened.add([note("m1", "bees on the roof"), note("m2", "a piano in the hall")])
        yield opened


def _counts(memory: ChromaMemory, *ids: str) -> list[tuple[int, str | None]]:
    return [(r.recall_count, r.last_recalled_at) for r in memory.get(ids, user_id="ann")]


@pytest.mark.parametrize("turn_id", ["", "t" * 257, 7, None])
def test_a_turn_id_must_be_1_to_256_characters(memory: ChromaMemory, turn_id: object) -> None:
    with pytest.raises(InvalidInputError, match="turn_id"):
        memory.apply_turn_writes(
            turn_id,  # type: ignore[arg-type]
            user_id="ann",
            recalled_ids=["m1"],
            recalled_at=STAMP,
            new_record=note("said", "hello"),
        )
    assert _counts(memory, "m1") == [(0, None)] and memory.count("ann") == 2
    assert memory.apply_turn_writes("t" * 256, user_id="ann").incremented == ()


def test_a_message_of_another_user_is_refused_before_any_count_moves(
    memory: ChromaMemory,
) -> None:
    with pytest.raises(InvalidInputError, match="belongs to user 'bob'"):
        memory.apply_turn_writes(
            "t1",
            user_id="ann",
            recalled_ids=["m1"],
            recalled_at=STAMP,
            new_record=note("said", "hello", user="bob"),
        )
    assert _counts(memory, "m1") == [(0, None)]
    assert memory.count("bob") == 0 and memory.count("ann") == 2


def test_a_turn_that_recalls_nothing_needs_no_time_and_stores_its_message(
    memory: ChromaMemory,
) -> None:
    report = memory.apply_turn_writes("t1", user_id="ann", new_record=note("said", "hello"))
    assert (report.incremented, report.missing, report.stored_new) == ((), (), True)
    assert [r.text for r in memory.get(["said"], user_id="ann")] == ["hello"]


def test_the_last_recall_moves_only_forward_whatever_order_turns_arrive_in(
    memory: ChromaMemory,
) -> None:
    later = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
    earlier = later.timestamp() - 86_400.0  # a float: epoch seconds
    report = memory.apply_turn_writes("t2", user_id="ann", recalled_ids=["m1"], recalled_at=later)
    assert report.incremented == ("m1",)
    memory.apply_turn_writes("t1", user_id="ann", recalled_ids=["m1", "m2"], recalled_at=earlier)
    assert _counts(memory, "m1", "m2") == [
        (2, "2025-05-01T09:30:00.000000+00:00"),
        (1, "2025-04-30T09:30:00.000000+00:00"),
    ]


def test_a_message_is_inserted_if_absent_or_replaced_when_asked(memory: ChromaMemory) -> None:
    first = note("said", "hello there")
    assert memory.apply_turn_writes("t1", user_id="ann", new_record=first).stored_new
    memory.apply_turn_writes("t2", user_id="ann", recalled_ids=["said"], recalled_at=STAMP)
    edited = note("said", "hello again")
    kept = memory.apply_turn_writes("t1", user_id="ann", new_record=edited)
    assert not kept.stored_new  # a replay never resets what later turns counted
    (said,) = memory.get(["said"], user_id="ann")
    assert (said.text, said.recall_count) == ("hello there", 1)
    replaced = memory.apply_turn_writes("t1", user_id="ann", new_record=edited, replace_new=True)
    assert replaced.stored_new
    (said,) = memory.get(["said"], user_id="ann")
    assert (said.text, said.recall_count) == ("hello again", 0)  # the record's own count
