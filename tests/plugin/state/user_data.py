"""Conversations of two users in a real state store, and what of a user a store still holds.

User ``ann`` owns ``ann-1`` (linked by its memory outbox item's ``user_id``), ``ann-2`` (linked
by ``link_user``) and an outbox item in the shared conversation ``team`` (named by
``new_record.user_id``); ``bob`` owns ``bob-1`` and his own item in ``team``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from affect_memory.kernel.models import AffectState, Mood
from affect_memory.kernel.protocols import Message, OutboxItem
from affect_memory.state.postgres import PostgresStateStore
from affect_memory.state.sqlite import SQLiteStateStore
from tests.plugin.state.postgres_fixture import run_sql, server_url, temporary_schema

Store = SQLiteStateStore | PostgresStateStore


def memory_item(ident: str, user_id: str, *, nested: bool = False) -> OutboxItem:
    """A memory turn effect's outbox item naming ``user_id`` (at the top or in its record)."""
    payload: dict[str, Any] = {"turn_id": ident, "recalled_ids": []}
    if nested:
        payload["new_record"] = {"id": ident, "user_id": user_id}
    else:
        payload["user_id"] = user_id
    return OutboxItem(id=f"{ident}-memory", topic="memory", payload=payload)


async def commit(
    store: Store, conversation: str, text: str, outbox: tuple[OutboxItem, ...] = ()
) -> None:
    """One committed turn of ``conversation``."""
    async with store.transaction(conversation) as transaction:
        await transaction.commit(
            state=AffectState(mood=Mood(valence=0.2)),
            messages=[Message(role="user", content=text)],
            outbox=outbox,
        )


async def seed_conversations(store: Store) -> None:
    """Both users' conversations (see the module)."""
    await commit(store, "ann-1", "ann says hi", (memory_item("a1", "ann"),))
    await commit(store, "ann-2", "ann again")
    await store.link_user("ann-2", "ann")
    await commit(store, "bob-1", "bob says hi", (memory_item("b1", "bob"),))
    await commit(store, "team", "shared", (memory_item("a2", "ann", nested=True),))
    await commit(store, "team", "shared too", (memory_item("b2", "bob"),))


def held(kind: str, where: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the store's tables, sorted, read with a connection of its own."""
    statements = {
        "conversations": "SELECT conversation_id FROM {}conversations",
        "messages": "SELECT conversation_id, content FROM {}messages",
        "outbox": "SELECT id, conversation_id FROM {}outbox",
        "conversation_users": "SELECT conversation_id, user_id FROM {}conversation_users",
        "turn_affect": "SELECT conversation_id FROM {}turn_affect",
    }
    if kind == "sqlite":
        import sqlite3

        connection = sqlite3.connect(where)
        try:
            return {
                table: sorted(connection.execute(text.format("")).fetchall())
                for table, text in statements.items()
            }
        finally:
            connection.close()
    url, schema = where.split("#")
    return {
        table: sorted(run_sql(url, text.format(f'"{schema}".')))
        for table, text in statements.items()
    }


def mentions(rows: dict[str, list[tuple[Any, ...]]], user_id: str) -> list[tuple[Any, ...]]:
    """Rows that name ``user_id``'s conversations or items (by this seed's naming)."""
    prefix = user_id[0]
    return [
        row
        for table in rows.values()
        for row in table
        if any(
            isinstance(value, str)
            and (value.startswith(f"{user_id}-") or value.startswith(f"{prefix}1-")
                 or value.startswith(f"{prefix}2-") or value == user_id or user_id in value)
            for value in row
        )
    ]  # fmt: skip


@contextmanager
def state_location(kind: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``(url for open_state_store / --state, where for held)`` of a fresh store."""
    if kind == "sqlite":
        path = tmp_path / "state.db"
        yield str(path), str(path)
        return
    url = server_url()
    with temporary_schema(url) as schema:
        yield f"{url}?schema={schema}", f"{url}#{schema}"
