"""What ``bench fleet`` checks once its workers have stopped, from what the stores hold.

- every conversation's transcript strictly pairs user and assistant messages;
- every conversation's state equals a serial replay of its transcript, in commit order;
- every committed turn has exactly one outbox item, applied, and its new memory exists once;
  no item exists for a turn that was not committed;
- every memory's recall count equals the number of committed turns that surfaced it;
- no turn surfaced a memory of another user.

Transcripts and states are read through the store; outbox rows (which the store hands out only
while pending) are read from its tables.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from affect_memory.bench.fleet_worker import intent_of, reply_for

__all__ = ["Check", "FleetData", "read_fleet", "verify"]

@dataclass
class FleetData:
    """What the stores hold after a run."""

    transcripts: dict[str, list[Any]]
    states: dict[str, Any]
    outbox: list[tuple[str, str, dict[str, Any], bool]]
    """(item id, conversation, payload, applied) of every memory-write outbox row."""


@dataclass
class Check:
    """One property of the run: whether it held, and the numbers behind it."""

    name: str
    ok: bool
    detail: str
    numbers: dict[str, Any] = field(default_factory=dict)


async def read_fleet(store: Any, conversations: Mapping[str, str], outbox_sql: Any) -> FleetData:
    """Every conversation's transcript and state through ``store``, and the outbox rows
    ``outbox_sql()`` returns as (id, conversation, payload text, applied)."""
    transcripts: dict[str, list[Any]] = {}
    states: dict[str, Any] = {}
    for conversation in conversations:
        async with store.transaction(conversation) as transaction:
            states[conversation] = await transaction.load_state()
            transcripts[conversation] = list(await transaction.load_transcript())
    rows = [
        (str(item_id), str(conversation), json.loads(payload), bool(applied))
        for item_id, conversation, payload, applied in outbox_sql()
    ]
    return FleetData(transcripts, states, rows)


def verify(
    data: FleetData,
    conversations: Mapping[str, str],
    seeded: Mapping[str, set[str]],
    recall_counts: Any,
    present: Any,
) -> list[Check]:
    """Every check of the run. ``recall_counts(user, ids)`` and ``present(user, ids)`` read
    the memory: the authoritative count of each id, and which ids exist."""
    checks = [_pairing(data), _replay(data, conversations)]
    turns = {
        conversation: [m.content for m in transcript if m.role == "user"]
        for conversation, transcript in data.transcripts.items()
    }
    checks.append(_outbox(data, turns, conversations, present))
    checks += _recalls_and_users(data, conversations, seeded, recall_counts)
    return checks


def _pairing(data: FleetData) -> Check:
    bad: list[str] = []
    messages = 0
    for conversation, transcript in data.transcripts.items():
        messages += len(transcript)
        pairs = list(zip(transcript[::2], transcript[1::2], strict=False))
        if len(transcript) % 2 or any(
            user.role != "user"
            or assistant.role != "assistant"
            or assistant.content != reply_for(user.content)
            or assistant.timestamp != user.timestamp
            for user, assistant in pairs
        ):
            bad.append(conversation)
    return Check(
        "transcripts pair user and assistant",
        not bad,
        f"{messages:,} messages in {len(data.transcripts)} conversations"
        + (f"; unpaired in {', '.join(bad[:5])}" if bad else ", every one a strict pair"),
        {"messages": messages, "unpaired_conversations": len(bad)},
    )


def _replay(data: FleetData, conversations: Mapping[str, str]) -> Check:
    worst = 0.0
    differing: list[str] = []
    for conversation, transcript in data.transcripts.items():
        user = conversations[conversation]
        replayed = asyncio.run(_serial_replay(conversation, user, transcript))
        stored = data.states[conversation]
        if (stored is None) != (replayed is None):
            differing.append(conversation)
            continue
        if stored is None:
            continue
        difference = _difference(stored.model_dump(mode="json"), replayed.model_dump(mode="json"))
        worst = max(worst, difference)
        if difference > 1e-9:
            differing.append(conversation)
    return Check(
        "final states equal a serial replay",
        not differing,
        f"{len(data.transcripts)} conversations replayed in commit order; largest difference "
        f"{worst:.1e}" + (f"; differ: {', '.join(differing[:5])}" if differing else ""),
        {"largest_difference": worst, "differing_conversations": len(differing)},
    )


async def _serial_replay(conversation: str, user: str, transcript: list[Any]) -> Any:
    from affect_memory.kernel import AffectEngine, GateResult, InMemoryStateStore, ScriptedModel

    if not transcript:
        return None
    times = iter(datetime.fromisoformat(message.timestamp) for message in transcript[::2])
    store = InMemoryStateStore()
    model = ScriptedModel(
        classify=lambda request: GateResult(intent=intent_of(request.message)),
        respond=lambda request: (reply_for(request.message),),
    )
    engine = AffectEngine(
        model=model,
        store=store,
        conversation_id=conversation,
        user_id=user,
        clock=lambda: next(times),
    )
    for message in transcript[::2]:
        await engine.turn(message.content)
    async with store.transaction(conversation) as transaction:
        return await transaction.load_state()


def _difference(left: Any, right: Any) -> float:
    """The largest numeric difference between two JSON values; inf where their shapes differ."""
    if isinstance(left, dict) and isinstance(right, dict):
        if left.keys() != right.keys():
            return math.inf
        return max((_difference(left[k], right[k]) for k in left), default=0.0)
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            return math.inf
        return max((_difference(a, b) for a, b in zip(left, right, strict=True)), default=0.0)
    if isinstance(left, bool) or isinstance(right, bool):
        return 0.0 if left == right else math.inf
    if isinstance(left, int | float) and isinstance(right, int | float):
        return abs(float(left) - float(right))
    return 0.0 if left == right else math.inf


def _outbox(
    data: FleetData, turns: Mapping[str, list[str]], conversations: Mapping[str, str], present: Any
) -> Check:
    committed = sum(len(messages) for messages in turns.values())
    by_turn: Counter[tuple[str, str]] = Counter()
    orphans = unapplied = 0
    expected_new: dict[str, list[str]] = {}
    for _, conversation, payload, applied in data.outbox:
        record = payload.get("new_record") or {}
        by_turn[(conversation, str(record.get("text")))] += 1
        if str(record.get("text")) not in set(turns.get(conversation, ())):
            orphans += 1
        if not applied:
            unapplied += 1
        if record:
            expected_new.setdefault(conversations[conversation], []).append(str(record["id"]))
    missing = sum(
        1 for conversation, messages in turns.items() for text in messages
        if by_turn[(conversation, text)] == 0
    )  # fmt: skip
    doubled = sum(1 for count in by_turn.values() if count > 1)
    new_ids = sum(len(ids) for ids in expected_new.values())
    stored = sum(len(present(user, ids)) for user, ids in expected_new.items())
    ok = not (missing or doubled or orphans or unapplied) and stored == new_ids
    return Check(
        "every committed turn's outbox item applied exactly once",
        ok,
        f"{committed:,} committed turns, {len(data.outbox):,} outbox items: {unapplied} pending, "
        f"{missing} missing, {doubled} doubled, {orphans} without a committed turn; "
        f"{stored:,} of {new_ids:,} new memories stored",
        {
            "committed_turns": committed,
            "outbox_items": len(data.outbox),
            "pending": unapplied,
            "missing": missing,
            "doubled": doubled,
            "orphans": orphans,
            "new_memories": new_ids,
            "new_memories_stored": stored,
        },
    )


def _recalls_and_users(
    data: FleetData,
    conversations: Mapping[str, str],
    seeded: Mapping[str, set[str]],
    recall_counts: Any,
) -> list[Check]:
    owned: dict[str, set[str]] = {user: set(ids) for user, ids in seeded.items()}
    surfaced: dict[str, Counter[str]] = {user: Counter() for user in seeded}
    for _, conversation, payload, _ in data.outbox:
        user = conversations[conversation]
        record = payload.get("new_record")
        if record:
            owned[user].add(str(record["id"]))
        surfaced[user].update(str(ident) for ident in payload.get("recalled_ids") or ())
    foreign = sum(
        count for user, counts in surfaced.items()
        for ident, count in counts.items() if ident not in owned[user]
    )  # fmt: skip
    expected = lost = extra = counted = 0
    wrong: list[str] = []
    for user, ids in owned.items():
        ordered = sorted(ids)
        counts = recall_counts(user, ordered)
        for ident, count in zip(ordered, counts, strict=True):
            want = surfaced[user][ident]
            expected += want
            counted += int(count)
            lost += max(0, want - int(count))
            extra += max(0, int(count) - want)
            if want != int(count) and len(wrong) < 5:
                wrong.append(f"{user}/{ident}: {want} surfaced, {int(count)} counted")
    memories = sum(len(ids) for ids in owned.values())
    recalls = Check(
        "recall counts equal the turns that surfaced each memory",
        lost == 0 and extra == 0,
        f"{memories:,} memories; {expected:,} recalls by committed turns, {counted:,} counted: "
        f"{lost} lost, {extra} extra" + (f" (e.g. {'; '.join(wrong[:2])})" if wrong else ""),
        {"memories": memories, "expected": expected, "counted": counted, "lost": lost,
         "extra": extra, "examples": wrong},
    )  # fmt: skip
    users = Check(
        "no cross-user result",
        foreign == 0,
        f"{sum(sum(c.values()) for c in surfaced.values()):,} surfaced memories, "
        f"{foreign} of another user",
        {"foreign": foreign},
    )
    return [recalls, users]
