"""The index's tables, the same DDL and statements on SQLite and PostgreSQL, and its migrations.

Tables (every row keyed by ``user_key``, a 63-bit hash of the user's collection name):

* ``index_users``: one row per user collection: the Chroma collection's name and id (a
  recreated collection is re-indexed), the analyzer its postings were built with, the
  memory count N and total length in terms (BM25's statistics), the next document key, and
  whether its documents carry the ranked fields (``ranked_fields``, migration 3);
* ``index_docs``: one row per memory: its id, a hash of its text, its length, its timestamp
  epoch, the authoritative recall count and last-recalled time, and (migration 3) what
  ranking reads of Chroma's row: its text, ISO timestamp, significance, valence and episode
  flag, so recall's pruned fetch need not read Chroma (all NULL for a row written before
  migration 3, until a backfill, or one whose Chroma metadata is malformed), and its
  embedding as Chroma returns it (``embedding``: little-endian float32 bytes, or float64
  bytes for an HTTP client's decimal-parsed values; NULL when not read), so recall's cosine
  of a member only the lexical search found need not read Chroma;
* ``index_postings``: ``(term, document, tf, length)``, what BM25 scores;
* ``index_recalls``: ``(document, turn id)``, each turn's recall counted once per memory;
* ``index_journal``: writes announced but not yet known to have reached Chroma, one per
  memory id, reconciled against Chroma after a crash
  (``affect_memory.memory.index.consistency.journal``);
* ``index_changes``: which documents each change of a user's postings touched, by the
  user's ``generation`` (so a process's cache of postings catches up, ``lexical``);
* ``index_erasures`` (migration 4): one row per user whose erasure has started and not yet
  finished (``affect_memory.memory.erasure``), so a killed erasure is finished on the next open;
* ``index_tags`` (migration 5): each memory's filterable fields (``agent_id``,
  ``conversation_id``, every ``extra`` key) as ``(field, value key)`` rows
  (``affect_memory.memory.filters.value_key``), so a filtered recall restricts its lexical
  candidates in SQL; ``index_docs.tagged`` is 1 where a memory's tags are known (NULL: written
  before migration 5, until a backfill, or its Chroma metadata was not read);
* ``index_schema_version``: one row per applied migration.

Statements use ``?`` placeholders; the PostgreSQL backend turns them into ``%s``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from affect_memory.memory.index.storage.backend import Tx

__all__ = [
    "FIELDS_LEVEL",
    "IN_CHUNK",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "in_chunks",
    "migrate",
    "placeholders",
    "read_version",
    "user_key",
]

SCHEMA_VERSION = 5
"""The newest migration; an index recording a newer one is refused."""

TABLES = (
    "index_users",
    "index_docs",
    "index_postings",
    "index_recalls",
    "index_journal",
    "index_changes",
    "index_erasures",
    "index_tags",
)
"""The index's tables, besides ``index_schema_version``."""

FIELDS_LEVEL = 2
"""``index_users.ranked_fields`` of a user whose documents carry every field the index keeps:
1 from migration 3 (ranked fields, embeddings), 2 from migration 5 (filter tags); a user
below it is backfilled on its next settling."""

VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS index_schema_version ("
    " version INTEGER PRIMARY KEY,"
    " description TEXT NOT NULL)"
)
"""Created before any migration runs."""

MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "users, documents, postings, recalls and the journal",
        (
            "CREATE TABLE index_users ("
            " user_key BIGINT PRIMARY KEY,"
            " collection TEXT NOT NULL UNIQUE,"
            " collection_id TEXT NOT NULL,"
            " user_id TEXT NOT NULL,"
            " analyzer TEXT NOT NULL,"
            " doc_count BIGINT NOT NULL DEFAULT 0,"
            " total_length BIGINT NOT NULL DEFAULT 0,"
            " next_doc BIGINT NOT NULL DEFAULT 0)",
            "CREATE TABLE index_docs ("
            " user_key BIGINT NOT NULL,"
            " doc_key BIGINT NOT NULL,"
            " memory_id TEXT NOT NULL,"
            " text_hash TEXT NOT NULL,"
            " length BIGINT NOT NULL,"
            " epoch DOUBLE PRECISION,"
            " recall_count BIGINT NOT NULL DEFAULT 0,"
            " last_recalled_epoch DOUBLE PRECISION,"
            " last_recalled_at TEXT,"
            " PRIMARY KEY (user_key, doc_key),"
            " UNIQUE (user_key, memory_id))",
            "CREATE INDEX index_docs_by_epoch ON index_docs (user_key, epoch)",
            "CREATE TABLE index_postings ("
            " user_key BIGINT NOT NULL,"
            " term TEXT NOT NULL,"
            " doc_key BIGINT NOT NULL,"
            " tf INTEGER NOT NULL,"
            " length BIGINT NOT NULL,"
            " PRIMARY KEY (user_key, term, doc_key))",
            "CREATE INDEX index_postings_by_doc ON index_postings (user_key, doc_key)",
            "CREATE TABLE index_recalls ("
            " user_key BIGINT NOT NULL,"
            " doc_key BIGINT NOT NULL,"
            " turn_id TEXT NOT NULL,"
            " PRIMARY KEY (user_key, doc_key, turn_id))",
            "CREATE TABLE index_journal ("
            " user_key BIGINT NOT NULL,"
            " memory_id TEXT NOT NULL,"
            " op TEXT NOT NULL,"
            " intent TEXT NOT NULL,"
            " due DOUBLE PRECISION NOT NULL,"
            " PRIMARY KEY (user_key, memory_id))",
        ),
    ),
    (
        2,
        "postings generations and their change log",
        (
            "ALTER TABLE index_users ADD COLUMN generation BIGINT NOT NULL DEFAULT 0",
            "CREATE TABLE index_changes ("
            " user_key BIGINT NOT NULL,"
            " generation BIGINT NOT NULL,"
            " doc_key BIGINT NOT NULL,"
            " PRIMARY KEY (user_key, generation, doc_key))",
        ),
    ),
    (
        3,
        "the fields ranking reads of each memory's Chroma row, and its embedding",
        (
            "ALTER TABLE index_docs ADD COLUMN doc_text TEXT",
            "ALTER TABLE index_docs ADD COLUMN stamp TEXT",
            "ALTER TABLE index_docs ADD COLUMN significance DOUBLE PRECISION",
            "ALTER TABLE index_docs ADD COLUMN valence DOUBLE PRECISION",
            "ALTER TABLE index_docs ADD COLUMN episode INTEGER",
            # little-endian float32 bytes, or float64 where Chroma's values are not float32
            # (``embedding_bytes``; BYTEA: PostgreSQL's type; SQLite keeps a blob as is)
            "ALTER TABLE index_docs ADD COLUMN embedding BYTEA",
            # 0: the user's documents were indexed before migration 3 (a backfill fills them)
            "ALTER TABLE index_users ADD COLUMN ranked_fields INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    (
        4,
        "erasures started and not yet finished",
        (
            "CREATE TABLE index_erasures ("
            " user_key BIGINT PRIMARY KEY,"
            " user_id TEXT NOT NULL,"
            " collection TEXT NOT NULL,"
            " segments TEXT NOT NULL)",
        ),
    ),
    (
        5,
        "each memory's filterable fields (agent, conversation, extra keys) as tags",
        (
            "CREATE TABLE index_tags ("
            " user_key BIGINT NOT NULL,"
            " doc_key BIGINT NOT NULL,"
            " field TEXT NOT NULL,"
            " value TEXT NOT NULL,"
            " PRIMARY KEY (user_key, doc_key, field))",
            "CREATE INDEX index_tags_by_value ON index_tags (user_key, field, value)",
            # NULL: the document's tags are not known (a backfill fills them)
            "ALTER TABLE index_docs ADD COLUMN tagged INTEGER",
        ),
    ),
)
"""Every migration: (version, description, statements), applied in order, each once."""

IN_CHUNK = 500
"""Most values bound in one ``IN (...)`` list (SQLite's oldest limit is 999 variables)."""

_T = TypeVar("_T")


def placeholders(count: int) -> str:
    """``?, ?, ...`` for an ``IN`` list of ``count`` values."""
    return ", ".join("?" * count)


def in_chunks(items: Sequence[_T], size: int = IN_CHUNK) -> Iterator[Sequence[_T]]:
    """``items`` in slices small enough to bind in one statement."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def user_key(collection: str) -> int:
    """The user's key in every table: the first 63 bits of the SHA-256 of the collection name.

    Two collections sharing a key is refused by ``index_users.collection``'s uniqueness
    (about 1 in 2 x 10^7 at a million users), never merged.
    """
    return int.from_bytes(hashlib.sha256(collection.encode("utf-8")).digest()[:8], "big") >> 1


def migrate(tx: Tx, *, where: str) -> None:
    """Create the tables of a new index or apply its missing migrations, in ``tx``.

    The caller holds the index exclusively for ``tx`` (SQLite's write lock, PostgreSQL's
    advisory lock), so opening from many processes at once migrates once.
    """
    from affect_memory.errors import StoreError

    present = tx.existing_tables([*TABLES, "index_schema_version"])
    if present and "index_schema_version" not in present:
        raise StoreError(
            f"the memory index at {where} holds tables ({', '.join(sorted(present))}) but no "
            "index_schema_version table; point --index at another database or schema"
        )
    tx.run(VERSION_TABLE)
    row = tx.one("SELECT MAX(version) FROM index_schema_version")
    version = 0 if row is None or row[0] is None else int(row[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the memory index at {where} has schema version {version}; this affect-memory "
            f"reads version {SCHEMA_VERSION} (upgrade affect-memory, or use another index)"
        )
    for number, description, statements in MIGRATIONS:
        if number <= version:
            continue
        for statement in statements:
            tx.run(statement)
        tx.run(
            "INSERT INTO index_schema_version (version, description) VALUES (?, ?)",
            (number, description),
        )


def read_version(tx: Tx) -> int | None:
    """The newest applied migration, or None for a database without the index's tables."""
    if "index_schema_version" not in tx.existing_tables(["index_schema_version"]):
        return None
    row = tx.one("SELECT MAX(version) FROM index_schema_version")
    return 0 if row is None or row[0] is None else int(row[0])
