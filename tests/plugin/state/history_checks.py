"""Reading a conversation's turn history straight from a store's tables, and checking it
against the transcript: one row per committed turn, each with the mood of replaying the turns
up to it (the workers of ``sqlite_worker`` and ``postgres_worker`` name each turn's intent)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from affect_memory.kernel import AffectState, DefaultAppraisalPolicy
from tests.plugin.state.postgres_fixture import run_sql
from tests.plugin.state.sqlite_worker import intent_of

POLICY = DefaultAppraisalPolicy()

_JOINED = (
    "SELECT m.role, m.content, t.message_seq IS NOT NULL, t.pleasure, t.arousal, t.dominance, "
    "t.emotions FROM {messages} AS m LEFT JOIN {turn_affect} AS t "
    "ON t.conversation_id = m.conversation_id AND t.message_seq = m.seq "
    "WHERE m.conversation_id = {p} ORDER BY m.seq"
)
_ORPHANS = (
    "SELECT count(*) FROM {turn_affect} AS t WHERE t.conversation_id = {p} AND NOT EXISTS "
    "(SELECT 1 FROM {messages} AS m WHERE m.conversation_id = t.conversation_id "
    "AND m.seq = t.message_seq AND m.role = 'user')"
)


def sqlite_history(db: Path, conversation: str) -> tuple[list[tuple[Any, ...]], int]:
    """Every message of ``conversation`` with its history row, and how many history rows name
    no user message of it."""
    names = {"messages": "messages", "turn_affect": "turn_affect", "p": "?"}
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute(_JOINED.format(**names), (conversation,)).fetchall()
        orphans = connection.execute(_ORPHANS.format(**names), (conversation,)).fetchone()[0]
    finally:
        connection.close()
    return rows, int(orphans)


def postgres_history(
    url: str, schema: str, conversation: str
) -> tuple[list[tuple[Any, ...]], int]:
    """As ``sqlite_history``, from a PostgreSQL schema."""
    names = {
        "messages": f'"{schema}".messages',
        "turn_affect": f'"{schema}".turn_affect',
        "p": "%s",
    }
    rows = run_sql(url, _JOINED.format(**names), (conversation,))
    orphans = run_sql(url, _ORPHANS.format(**names), (conversation,))[0][0]
    return rows, int(orphans)


def assert_history_replays(rows: list[tuple[Any, ...]], orphans: int) -> None:
    """Exactly one history row per user message and none other, each holding the mood and
    carried emotions of replaying the conversation's turns up to it."""
    assert orphans == 0
    replayed = AffectState()
    for role, content, recorded, pleasure, arousal, dominance, emotions in rows:
        if role == "assistant":
            assert not recorded
            continue
        assert recorded, f"turn {content!r} was committed without its history row"
        replayed = POLICY.appraise(replayed, intent_of(content), content).state
        assert (pleasure, arousal, dominance) == pytest.approx(
            (replayed.mood.valence, replayed.mood.arousal, replayed.mood.dominance), abs=1e-12
        )
        assert json.loads(emotions) == pytest.approx(dict(replayed.occ_carry), abs=1e-12)
