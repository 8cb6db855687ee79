"""The PostgreSQL store's schema: its tables, the statements over them, and migrations.

Every table lives in one configurable schema (``affect_memory`` by default), named in every
statement, so several deployments or test runs share a database without meeting.
``schema_version`` records each applied migration; opening a store applies the missing ones
under a transaction-scoped advisory lock, so opening from many processes at once is safe and
opening twice is a no-op. A newer or unknown version is refused in one line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from affect_memory.db.postgres_connections import Connection, one_line, set_lock_timeout
from affect_memory.kernel.errors import StateStoreError

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "TABLES",
    "Statements",
    "migrate",
    "read_version",
    "refuse_unknown",
    "schema_key32",
]

SCHEMA_VERSION = 3
"""The newest migration this module applies and the only schema version it reads."""

DEFAULT_SCHEMA = "affect_memory"
"""The PostgreSQL schema a store uses unless told otherwise."""

_MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "conversations, messages and outbox",
        (
            "CREATE TABLE {schema}.conversations ("
            " conversation_id text PRIMARY KEY,"
            " state text NOT NULL,"
            " updated_at timestamptz NOT NULL)",
            # seq numbers a conversation's messages 1, 2, 3...; the primary key refuses a
            # second writer of the same position even if locking were ever bypassed.
            "CREATE TABLE {schema}.messages ("
            " conversation_id text NOT NULL,"
            " seq bigint NOT NULL CHECK (seq > 0),"
            " role text NOT NULL CHECK (role IN ('user', 'assistant')),"
            " content text NOT NULL,"
            ' "timestamp" text NOT NULL,'
            " PRIMARY KEY (conversation_id, seq))",
            "CREATE TABLE {schema}.outbox ("
            " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " id text NOT NULL UNIQUE,"
            " topic text NOT NULL,"
            " payload text NOT NULL,"
            " conversation_id text NOT NULL,"
            " applied boolean NOT NULL DEFAULT false,"
            " created_at timestamptz NOT NULL DEFAULT now())",
            "CREATE INDEX outbox_pending ON {schema}.outbox (topic, seq) WHERE NOT applied",
        ),
    ),
    (
        2,
        "which users each conversation belongs to",
        (
            "CREATE TABLE {schema}.conversation_users ("
            " conversation_id text NOT NULL,"
            " user_id text NOT NULL,"
            " PRIMARY KEY (conversation_id, user_id))",
            "CREATE INDEX conversation_users_by_user ON {schema}.conversation_users (user_id)",
        ),
    ),
    (
        3,
        "the mood and emotions after each committed turn",
        (
            # A NULL mood: the turn kept the state as it was (affect_memory.state.turn_history).
            "CREATE TABLE {schema}.turn_affect ("
            " conversation_id text NOT NULL,"
            " message_seq bigint NOT NULL,"
            " pleasure double precision,"
            " arousal double precision,"
            " dominance double precision,"
            " emotions text,"
            " PRIMARY KEY (conversation_id, message_seq))",
        ),
    ),
)
TABLES = ("conversations", "messages", "outbox", "conversation_users", "turn_affect")
"""The store's tables, besides ``schema_version``."""
_MIGRATION_LOCK_CLASS = 0x41464D4D
"""First half of the two-int advisory key that serializes migrations ('AFMM')."""


@dataclass(frozen=True)
class Statements:
    """Every statement the store runs, rendered once for its schema."""

    try_lock: str
    lock: str
    unlock: str
    read_state: str
    read_transcript: str
    read_newest: str
    upsert_state: str
    append_messages: str
    add_outbox: str
    pending: str
    complete: str
    version: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """Statements naming every table of ``schema`` explicitly (no search_path reliance)."""

        def render(text: str) -> str:
            tables = {name: sql.Identifier(schema, name) for name in (*TABLES, "schema_version")}
            return sql.SQL(text).format(**tables).as_string(None)

        return cls(
            try_lock="SELECT pg_try_advisory_lock(%s)",
            lock="SELECT pg_advisory_lock(%s)",
            unlock="SELECT pg_advisory_unlock(%s)",
            read_state=render("SELECT state FROM {conversations} WHERE conversation_id = %s"),
            read_transcript=render(
                'SELECT seq, role, content, "timestamp" FROM {messages} '
                "WHERE conversation_id = %s ORDER BY seq"
            ),
            read_newest=render(
                'SELECT seq, role, content, "timestamp" FROM ('
                'SELECT seq, role, content, "timestamp" FROM {messages} '
                "WHERE conversation_id = %s ORDER BY seq DESC LIMIT %s) AS newest ORDER BY seq"
            ),
            upsert_state=render(
                "INSERT INTO {conversations} (conversation_id, state, updated_at) "
                "VALUES (%s, %s, %s) ON CONFLICT (conversation_id) DO UPDATE SET "
                "state = EXCLUDED.state, updated_at = EXCLUDED.updated_at"
            ),
            append_messages=render(
                'INSERT INTO {messages} (conversation_id, seq, role, content, "timestamp") '
                "SELECT %(conversation)s, base.last + m.n, m.role, m.content, m.stamp "
                "FROM unnest(%(roles)s::text[], %(contents)s::text[], %(stamps)s::text[]) "
                "WITH ORDINALITY AS m (role, content, stamp, n) "
                "CROSS JOIN (SELECT COALESCE(max(seq), 0) AS last FROM {messages} "
                "WHERE conversation_id = %(conversation)s) AS base ORDER BY m.n"
            ),
            add_outbox=render(
                "INSERT INTO {outbox} (id, topic, payload, conversation_id) "
                "SELECT o.id, o.topic, o.payload, %(conversation)s "
                "FROM unnest(%(ids)s::text[], %(topics)s::text[], %(payloads)s::text[]) "
                "WITH ORDINALITY AS o (id, topic, payload, n) ORDER BY o.n "
                "ON CONFLICT (id) DO NOTHING"
            ),
            pending=render(
                "SELECT id, topic, payload FROM {outbox} WHERE topic = %s AND NOT applied "
                "ORDER BY seq LIMIT %s"
            ),
            complete=render(
                "UPDATE {outbox} SET applied = true WHERE id = ANY(%s) AND NOT applied"
            ),
            version=render("SELECT max(version) FROM {schema_version}"),
        )


def schema_key32(schema: str) -> int:
    """A signed 32-bit key of the schema for the two-int migration lock."""
    return int.from_bytes(hashlib.sha256(schema.encode()).digest()[:4], "big", signed=True)


def migrate(
    connection: Connection,
    *,
    schema: str,
    display: str,
    lock_timeout: float,
    statements: Statements,
) -> None:
    """Apply missing migrations once, however many processes open the schema at once."""
    version = read_version(connection, schema=schema, display=display, statements=statements)
    if version == SCHEMA_VERSION:
        return
    refuse_unknown(version, schema=schema, display=display)
    identifier = sql.Identifier(schema)
    try:
        with connection.transaction():
            set_lock_timeout(connection, lock_timeout)
            connection.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)",
                (_MIGRATION_LOCK_CLASS, schema_key32(schema)),
            )
            exists = connection.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
            if exists is None:
                connection.execute(sql.SQL("CREATE SCHEMA {}").format(identifier))
            found = connection.execute(
                "SELECT c.relname FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname = ANY(%s)",
                (schema, [*TABLES, "schema_version"]),
            ).fetchall()
            names = {name for (name,) in found}
            if "schema_version" not in names and names:
                raise StateStoreError(
                    f"PostgreSQL schema {schema!r} at {display} holds tables "
                    f"({', '.join(sorted(names))}) but no affect-memory schema_version "
                    "table; use another schema"
                )
            connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
                    "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(sql.Identifier(schema, "schema_version"))
            )
            row = connection.execute(statements.version).fetchone()
            version = 0 if row is None or row[0] is None else int(row[0])
            refuse_unknown(version, schema=schema, display=display)
            for number, description, steps in _MIGRATIONS:
                if number <= version:
                    continue
                for statement in steps:
                    connection.execute(sql.SQL(statement).format(schema=identifier))
                connection.execute(
                    sql.SQL("INSERT INTO {} (version, description) VALUES (%s, %s)").format(
                        sql.Identifier(schema, "schema_version")
                    ),
                    (number, description),
                )
    except pg_errors.LockNotAvailable:
        raise StateStoreError(
            f"another process kept migrating PostgreSQL schema {schema!r} at "
            f"{display} for longer than {lock_timeout:g} s (lock_timeout)"
        ) from None
    except psycopg.Error as error:
        raise StateStoreError(
            f"cannot create PostgreSQL schema {schema!r} at {display}: "
            f"{one_line(error)}"
        ) from error

def read_version(
    connection: Connection, *, schema: str, display: str, statements: Statements
) -> int | None:
    """The schema's newest applied migration; None when it has no version table yet."""
    try:
        row = connection.execute(statements.version).fetchone()
    except pg_errors.UndefinedTable:
        return None
    except psycopg.Error as error:
        raise StateStoreError(
            f"cannot read the version of PostgreSQL schema {schema!r} at "
            f"{display}: {one_line(error)}"
        ) from error
    return 0 if row is None or row[0] is None else int(row[0])

def refuse_unknown(version: int | None, *, schema: str, display: str) -> None:
    """Refuse a schema whose version this code cannot read (newer, or not a version)."""
    if version is not None and not 0 <= version <= SCHEMA_VERSION:
        raise StateStoreError(
            f"PostgreSQL schema {schema!r} at {display} has schema version "
            f"{version}; this affect-memory reads version {SCHEMA_VERSION} (upgrade "
            "affect-memory, or use another schema)"
        )

