"""The SQLite store's turn history: writing a commit's ``turn_affect`` rows, listing a user's
conversations, reading one turn by turn, and claiming one for a user
(``affect_memory.state.turn_history``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from affect_memory.db.sqlite_connections import transaction
from affect_memory.state.turn_history import (
    ConversationSummary,
    ConversationTurn,
    TurnAffect,
    assemble_turns,
)

__all__ = ["add_turn_affect", "claim", "list_conversations", "read_turns"]

_ADD = (
    "INSERT INTO turn_affect (conversation_id, message_seq, pleasure, arousal, dominance, "
    "emotions) SELECT ?1, max(seq) - ?2, ?3, ?4, ?5, ?6 FROM messages WHERE conversation_id = ?1"
)
"""One row, its ``seq`` counted back from the newest: a commit's messages are inserted in one
write transaction, so their ``seq`` values are consecutive."""

_LIST = """
SELECT links.conversation_id,
       (SELECT count(*) FROM messages
        WHERE messages.conversation_id = links.conversation_id AND role = 'user'),
       coalesce(
           (SELECT timestamp FROM messages WHERE messages.conversation_id = links.conversation_id
            ORDER BY seq DESC LIMIT 1),
           (SELECT updated_at FROM conversations
            WHERE conversations.conversation_id = links.conversation_id))
FROM conversation_users AS links WHERE links.user_id = ? ORDER BY links.conversation_id
"""

_LINKED = "SELECT 1 FROM conversation_users WHERE conversation_id = ? AND user_id = ?"

_TURNS = """
SELECT m.seq, m.role, m.content, m.timestamp, t.message_seq IS NOT NULL,
       t.pleasure, t.arousal, t.dominance, t.emotions
FROM messages AS m LEFT JOIN turn_affect AS t
     ON t.conversation_id = m.conversation_id AND t.message_seq = m.seq
WHERE m.conversation_id = ? ORDER BY m.seq
"""

_OWNERS = "SELECT user_id FROM conversation_users WHERE conversation_id = ?"

_HELD = (
    "SELECT EXISTS (SELECT 1 FROM conversations WHERE conversation_id = ?1) "
    "OR EXISTS (SELECT 1 FROM messages WHERE conversation_id = ?1)"
)


def add_turn_affect(
    connection: sqlite3.Connection, conversation_id: str, rows: Sequence[TurnAffect]
) -> None:
    """Write a commit's history rows, after its messages, inside its write transaction."""
    for row in rows:
        pleasure, arousal, dominance = row.mood if row.mood is not None else (None, None, None)
        connection.execute(
            _ADD, (conversation_id, row.back, pleasure, arousal, dominance, row.emotions)
        )


def list_conversations(
    connection: sqlite3.Connection, user_id: str
) -> tuple[ConversationSummary, ...]:
    """The conversations linked to ``user_id``, by id, read in one snapshot."""
    with transaction(connection, immediate=False):
        rows = connection.execute(_LIST, (user_id,)).fetchall()
    return tuple(
        ConversationSummary(str(conversation_id), int(turns), None if stamp is None else str(stamp))
        for conversation_id, turns, stamp in rows
    )


def read_turns(
    connection: sqlite3.Connection, user_id: str, conversation_id: str
) -> tuple[ConversationTurn, ...] | None:
    """The turns of ``conversation_id``, or None unless it is linked to ``user_id``; the link
    and the turns are read in one snapshot."""
    with transaction(connection, immediate=False):
        if connection.execute(_LINKED, (conversation_id, user_id)).fetchone() is None:
            return None
        rows = connection.execute(_TURNS, (conversation_id,)).fetchall()
    return assemble_turns(conversation_id, rows)


def claim(connection: sqlite3.Connection, conversation_id: str, user_id: str) -> bool:
    """Link ``conversation_id`` to ``user_id`` unless another user holds it, or it holds
    turns and nobody does; run it inside a write transaction, so two claims never interleave."""
    owners = {owner for (owner,) in connection.execute(_OWNERS, (conversation_id,))}
    if user_id in owners:
        return True
    if owners or connection.execute(_HELD, (conversation_id,)).fetchone()[0]:
        return False
    connection.execute(
        "INSERT INTO conversation_users (conversation_id, user_id) VALUES (?, ?)",
        (conversation_id, user_id),
    )
    return True
