"""The PostgreSQL store's turn history: the statements that write a commit's ``turn_affect``
rows, list a user's conversations, read one turn by turn, and claim one for a user
(``affect_memory.state.turn_history``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from affect_memory.db.postgres_connections import Connection
from affect_memory.state.turn_history import (
    ConversationSummary,
    ConversationTurn,
    TurnAffect,
    assemble_turns,
)

__all__ = ["HistoryStatements", "claim", "history_parameters", "list_conversations", "read_turns"]

_CLAIM_LOCK_CLASS = 0x41464D43
"""First half of the two-int advisory key that serializes claims of one conversation ('AFMC')."""


@dataclass(frozen=True)
class HistoryStatements:
    """The history's statements, rendered once for a schema."""

    schema: str
    add: str
    erase: str
    listing: str
    linked: str
    turns: str
    owners: str
    held: str
    link: str

    @classmethod
    def for_schema(cls, schema: str) -> HistoryStatements:
        """Statements naming every table of ``schema`` explicitly."""
        names = ("conversations", "messages", "conversation_users", "turn_affect")
        tables = {name: sql.Identifier(schema, name) for name in names}

        def render(text: str) -> str:
            return sql.SQL(text).format(**tables).as_string(None)

        return cls(
            schema=schema,
            # A commit's messages get seq last+1, last+2, ... in its own transaction, so a
            # row's seq is the newest seq counted back.
            add=render(
                "INSERT INTO {turn_affect} (conversation_id, message_seq, pleasure, arousal, "
                "dominance, emotions) SELECT %(conversation)s, newest.seq - h.back, h.p, h.a, "
                "h.d, h.e FROM unnest(%(backs)s::bigint[], %(p)s::float8[], %(a)s::float8[], "
                "%(d)s::float8[], %(e)s::text[]) AS h (back, p, a, d, e) "
                "CROSS JOIN (SELECT max(seq) AS seq FROM {messages} "
                "WHERE conversation_id = %(conversation)s) AS newest"
            ),
            erase=render("DELETE FROM {turn_affect} WHERE conversation_id = ANY(%s)"),
            listing=render(
                "SELECT links.conversation_id, "
                "(SELECT count(*) FROM {messages} AS m "
                " WHERE m.conversation_id = links.conversation_id AND m.role = 'user'), "
                '(SELECT m."timestamp" FROM {messages} AS m '
                " WHERE m.conversation_id = links.conversation_id ORDER BY m.seq DESC LIMIT 1), "
                "(SELECT c.updated_at FROM {conversations} AS c "
                " WHERE c.conversation_id = links.conversation_id) "
                "FROM {conversation_users} AS links WHERE links.user_id = %s "
                "ORDER BY links.conversation_id COLLATE \"C\""
            ),
            linked=render(
                "SELECT 1 FROM {conversation_users} WHERE conversation_id = %s AND user_id = %s"
            ),
            # The link is checked again in the read itself, so no snapshot in between can hand
            # one user the rows of a conversation that was meanwhile erased and claimed anew.
            turns=render(
                'SELECT m.seq, m.role, m.content, m."timestamp", t.message_seq IS NOT NULL, '
                "t.pleasure, t.arousal, t.dominance, t.emotions FROM {messages} AS m "
                "LEFT JOIN {turn_affect} AS t "
                "ON t.conversation_id = m.conversation_id AND t.message_seq = m.seq "
                "WHERE m.conversation_id = %(conversation)s AND EXISTS (SELECT 1 FROM "
                "{conversation_users} AS u WHERE u.conversation_id = %(conversation)s "
                "AND u.user_id = %(user)s) ORDER BY m.seq"
            ),
            owners=render("SELECT user_id FROM {conversation_users} WHERE conversation_id = %s"),
            held=render(
                "SELECT EXISTS (SELECT 1 FROM {conversations} WHERE conversation_id = %(c)s) "
                "OR EXISTS (SELECT 1 FROM {messages} WHERE conversation_id = %(c)s)"
            ),
            link=render(
                "INSERT INTO {conversation_users} (conversation_id, user_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING"
            ),
        )


def history_parameters(conversation_id: str, rows: Sequence[TurnAffect]) -> dict[str, Any]:
    """The parameters of ``HistoryStatements.add`` for a commit's rows."""
    moods = [row.mood or (None, None, None) for row in rows]
    return {
        "conversation": conversation_id,
        "backs": [row.back for row in rows],
        "p": [mood[0] for mood in moods],
        "a": [mood[1] for mood in moods],
        "d": [mood[2] for mood in moods],
        "e": [row.emotions for row in rows],
    }


def list_conversations(
    connection: Connection, statements: HistoryStatements, user_id: str
) -> tuple[ConversationSummary, ...]:
    """The conversations linked to ``user_id``, by id."""
    rows = connection.execute(statements.listing, (user_id,)).fetchall()
    return tuple(
        ConversationSummary(str(conversation_id), int(turns), _stamp(newest, updated))
        for conversation_id, turns, newest, updated in rows
    )


def _stamp(newest: object, updated: object) -> str | None:
    """The newest message's timestamp, else when the state was written (ISO 8601)."""
    if newest is not None:
        return str(newest)
    return updated.isoformat() if isinstance(updated, datetime) else None


def read_turns(
    connection: Connection, statements: HistoryStatements, user_id: str, conversation_id: str
) -> tuple[ConversationTurn, ...] | None:
    """The turns of ``conversation_id``, or None unless it is linked to ``user_id``."""
    if connection.execute(statements.linked, (conversation_id, user_id)).fetchone() is None:
        return None
    rows = connection.execute(
        statements.turns, {"conversation": conversation_id, "user": user_id}
    ).fetchall()
    return assemble_turns(conversation_id, rows)


def claim(
    connection: Connection, statements: HistoryStatements, conversation_id: str, user_id: str
) -> bool:
    """Link ``conversation_id`` to ``user_id`` unless another user holds it, or it holds turns
    and nobody does; one transaction, under an advisory lock so two claims never interleave."""
    digest = hashlib.sha256(f"{statements.schema}\x00{conversation_id}".encode()).digest()
    key = int.from_bytes(digest[:4], "big", signed=True)
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_CLAIM_LOCK_CLASS, key))
        owners = {row[0] for row in connection.execute(statements.owners, (conversation_id,))}
        if user_id in owners:
            return True
        row = connection.execute(statements.held, {"c": conversation_id}).fetchone()
        if owners or (row is not None and row[0]):
            return False
        connection.execute(statements.link, (conversation_id, user_id))
        return True
