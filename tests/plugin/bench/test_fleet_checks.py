"""The fleet's checks pass on what a correct run leaves, and each fails on the fault it is for:
an unpaired transcript, a lost update, a missing, doubled, pending or orphan outbox item, a lost
or extra recall count, a memory of another user."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from affect_memory.bench.fleet_checks import Check, FleetData, verify
from affect_memory.bench.fleet_worker import intent_of, message_for, reply_for
from affect_memory.kernel import (
    AffectEngine,
    GateResult,
    InMemoryStateStore,
    Message,
    ScriptedModel,
)

START = datetime(2026, 12, 1, 9, tzinfo=UTC)
CONVERSATIONS = {"conv-00": "user-00", "conv-01": "user-01"}
SEEDED = {"user-00": {"user-00-m000", "user-00-m001"}, "user-01": {"user-01-m000"}}


async def _run(conversation: str, user: str, messages: list[str]) -> tuple[list[Message], Any]:
    """What the engine commits for ``messages``: the transcript and the final state."""
    store = InMemoryStateStore()
    times = iter(START + timedelta(minutes=n) for n in range(len(messages)))
    engine = AffectEngine(
        model=ScriptedModel(
            classify=lambda request: GateResult(intent=intent_of(request.message)),
            respond=lambda request: (reply_for(request.message),),
        ),
        store=store,
        conversation_id=conversation,
        user_id=user,
        clock=lambda: next(times),
    )
    for message in messages:
        await engine.turn(message)
    async with store.transaction(conversation) as transaction:
        return list(await transaction.load_transcript()), await transaction.load_state()


def _correct_run() -> tuple[FleetData, Counter[tuple[str, str]]]:
    """A run's stores as a correct fleet leaves them, and the recall counts they imply."""
    transcripts: dict[str, list[Message]] = {}
    states: dict[str, Any] = {}
    outbox: list[tuple[str, str, dict[str, Any], bool]] = []
    counts: Counter[tuple[str, str]] = Counter()
    dispatch = 0
    for conversation, user in CONVERSATIONS.items():
        messages = []
        for _ in range(3):
            messages.append(message_for("I went hiking today.", conversation, dispatch))
            recalled = sorted(SEEDED[user])[: 1 + dispatch % 2]
            outbox.append(
                (
                    f"turn-{dispatch}-chroma-memory",
                    conversation,
                    {
                        "turn_id": f"turn-{dispatch}",
                        "user_id": user,
                        "recalled_ids": recalled,
                        "new_record": {"id": f"turn-{dispatch}-msg", "text": messages[-1]},
                    },
                    True,
                )
            )
            counts.update((user, ident) for ident in recalled)
            dispatch += 1
        transcripts[conversation], states[conversation] = asyncio.run(
            _run(conversation, user, messages)
        )
    return FleetData(transcripts, states, outbox), counts


def _checks(
    data: FleetData,
    counts: Counter[tuple[str, str]],
    *,
    stored: Callable[[str, list[str]], set[str]] | None = None,
) -> dict[str, Check]:
    def recall_counts(user: str, ids: list[str]) -> list[int]:
        return [counts[(user, ident)] for ident in ids]

    def present(user: str, ids: list[str]) -> set[str]:
        return set(ids) if stored is None else stored(user, ids)

    checks = verify(data, CONVERSATIONS, SEEDED, recall_counts, present)
    return {check.name: check for check in checks}


def _failing(checks: dict[str, Check]) -> list[str]:
    return [name for name, check in checks.items() if not check.ok]


def test_a_correct_run_passes_every_check() -> None:
    data, counts = _correct_run()
    checks = _checks(data, counts)
    assert _failing(checks) == []
    assert checks["final states equal a serial replay"].numbers["largest_difference"] == 0.0
    assert checks["every committed turn's outbox item applied exactly once"].numbers == {
        "committed_turns": 6,
        "outbox_items": 6,
        "pending": 0,
        "missing": 0,
        "doubled": 0,
        "orphans": 0,
        "new_memories": 6,
        "new_memories_stored": 6,
    }
    recalls = checks["recall counts equal the turns that surfaced each memory"].numbers
    assert recalls["expected"] == recalls["counted"] == sum(counts.values()) == 7


def _unpaired(data: FleetData) -> None:
    del data.transcripts["conv-00"][-1]  # an assistant message lost


def _reordered(data: FleetData) -> None:
    transcript = data.transcripts["conv-01"]
    transcript[0], transcript[1] = transcript[1], transcript[0]


def _foreign_reply(data: FleetData) -> None:
    first = data.transcripts["conv-00"][1]
    data.transcripts["conv-00"][1] = first.model_copy(update={"content": "re: something else"})


def _lost_update(data: FleetData) -> None:
    # The state a turn computed from a stale read: one turn's appraisal is missing from it.
    transcript = data.transcripts["conv-00"]
    messages = [message.content for message in transcript[::2]]
    _, stale = asyncio.run(_run("conv-00", "user-00", messages[:1] + messages[2:]))
    data.states["conv-00"] = stale


def _missing_item(data: FleetData) -> None:
    del data.outbox[0]


def _doubled_item(data: FleetData) -> None:
    item_id, conversation, payload, applied = data.outbox[1]
    data.outbox.append((f"{item_id}-again", conversation, copy.deepcopy(payload), applied))


def _pending_item(data: FleetData) -> None:
    item_id, conversation, payload, _ = data.outbox[2]
    data.outbox[2] = (item_id, conversation, payload, False)


def _orphan_item(data: FleetData) -> None:
    payload = {"turn_id": "t-x", "user_id": "user-00", "recalled_ids": [],
               "new_record": {"id": "t-x-msg", "text": "never committed"}}  # fmt: skip
    data.outbox.append(("t-x-chroma-memory", "conv-00", payload, True))


@pytest.mark.parametrize(
    ("fault", "failing"),
    [
        (_unpaired, ["transcripts pair user and assistant"]),
        (_reordered, ["transcripts pair user and assistant"]),
        (_foreign_reply, ["transcripts pair user and assistant"]),
        (_lost_update, ["final states equal a serial replay"]),
        (_missing_item, ["every committed turn's outbox item applied exactly once"]),
        (_doubled_item, ["every committed turn's outbox item applied exactly once"]),
        (_pending_item, ["every committed turn's outbox item applied exactly once"]),
        (_orphan_item, ["every committed turn's outbox item applied exactly once"]),
    ],
)
def test_each_fault_fails_its_check(fault: Callable[[FleetData], None], failing: list[str]) -> None:
    data, counts = _correct_run()
    fault(data)
    # The counts a correct index would hold for what the outbox now says was surfaced.
    counts = Counter(
        (payload["user_id"], ident) for _, _, payload, _ in data.outbox
        for ident in payload["recalled_ids"]
    )  # fmt: skip
    assert _failing(_checks(data, counts)) == failing


def test_a_new_memory_that_was_never_stored_fails_the_outbox_check() -> None:
    data, counts = _correct_run()
    checks = _checks(data, counts, stored=lambda user, ids: set(ids[1:]))
    assert _failing(checks) == ["every committed turn's outbox item applied exactly once"]


@pytest.mark.parametrize(("change", "lost", "extra"), [(-1, 1, 0), (+1, 0, 1)])
def test_a_lost_or_extra_recall_fails_the_count_check(change: int, lost: int, extra: int) -> None:
    data, counts = _correct_run()
    counts[("user-00", "user-00-m000")] += change
    check = _checks(data, counts)["recall counts equal the turns that surfaced each memory"]
    assert not check.ok
    assert (check.numbers["lost"], check.numbers["extra"]) == (lost, extra)


def test_a_memory_of_another_user_fails_the_isolation_check() -> None:
    data, counts = _correct_run()
    payload = data.outbox[0][2]
    payload["recalled_ids"] = [*payload["recalled_ids"], "user-01-m000"]
    counts[("user-01", "user-01-m000")] += 0  # user-01's own count is unchanged
    checks = _checks(data, counts)
    assert not checks["no cross-user result"].ok
    assert checks["no cross-user result"].numbers == {"foreign": 1}
