"""The SQLite store's tables, and the upgrade of an older file's to this version on open."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path

from affect_memory.kernel.errors import StateStoreError

__all__ = ["SCHEMA_VERSION", "migrate"]

SCHEMA_VERSION = 4
"""``PRAGMA user_version`` of the tables this module writes; older files are upgraded on open."""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS conversations (
    conversation_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    timestamp TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, seq);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    applied INTEGER NOT NULL DEFAULT 0 CHECK (applied IN (0, 1))
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (topic, applied, seq);
"""

_UPGRADES: dict[int, tuple[str, ...]] = {
    # 1 -> 2: an outbox item that can never apply is set aside with its reason, not retried.
    1: (
        "ALTER TABLE outbox ADD COLUMN quarantine_reason TEXT",
        "ALTER TABLE outbox ADD COLUMN quarantined_at TEXT",
    ),
    # 2 -> 3: which users each conversation belongs to (``affect_memory.state.user_links``).
    2: (
        "CREATE TABLE conversation_users (conversation_id TEXT NOT NULL, user_id TEXT NOT NULL,"
        " PRIMARY KEY (conversation_id, user_id))",
        "CREATE INDEX conversation_users_by_user ON conversation_users (user_id)",
    ),
    # 3 -> 4: the mood and emotions after each committed turn, a NULL mood where the turn kept
    # the state as it was (``affect_memory.state.turn_history``).
    3: (
        "CREATE TABLE turn_affect (conversation_id TEXT NOT NULL, message_seq INTEGER NOT NULL,"
        " pleasure REAL, arousal REAL, dominance REAL, emotions TEXT,"
        " PRIMARY KEY (conversation_id, message_seq))",
    ),
}
"""The statements that take a file from each schema version to the next."""


def migrate(
    connection: sqlite3.Connection,
    write: Callable[[sqlite3.Connection], ContextManager[None]],
    path: Path,
    hint: str,
) -> None:
    """Create the tables of a new file, or upgrade an older file's, in one transaction."""
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if 0 <= version < SCHEMA_VERSION:
            with write(connection):
                # Read again under the write lock: another process may have upgraded it.
                version = connection.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    for statement in _SCHEMA_V1.split(";"):
                        if statement.strip():
                            connection.execute(statement)
                    version = 1
                while 0 < version < SCHEMA_VERSION:
                    for statement in _UPGRADES[version]:
                        connection.execute(statement)
                    version += 1
                connection.execute(f"PRAGMA user_version = {int(version)}")
    except sqlite3.DatabaseError as error:
        raise StateStoreError(
            f"{path} is not a usable SQLite database: {error}; {hint}"
        ) from error
    if version != SCHEMA_VERSION:
        raise StateStoreError(
            f"{path} has schema version {version}; this affect-memory reads version "
            f"{SCHEMA_VERSION} (upgrade affect-memory, or point it at another file)"
        )
