"""What the index needs of a database: short transactions, the same SQL, and per-user locks.

Two backends implement it, ``affect_memory.memory.index.storage.sqlite_backend`` (a file or a
process-shared in-memory database) and ``affect_memory.memory.index.storage.postgres_backend``.
Both run the statements of ``affect_memory.memory.index.storage.schema`` unchanged; ``Tx`` is the
one cursor the index's code sees.

A *user lock* serialises the writers of one user's memories across threads, processes and,
on PostgreSQL, hosts, for the length of a write (journal, Chroma, journal). It belongs to
its holder's process (a file lock, a PostgreSQL session), so a killed writer's lock goes
with it, and a try-lock tells a reconciler whether a live writer may still finish what the
journal shows pending.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, TypeVar

__all__ = ["Backend", "BackendKind", "Tx"]

_T = TypeVar("_T")

BackendKind = Literal["sqlite", "postgresql"]
"""Which database an index lives in."""


class Tx(Protocol):
    """One transaction's statements (``?`` placeholders)."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row the statement returns."""
        ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row the statement returns, or None."""
        ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        ...

    def existing_tables(self, names: Sequence[str]) -> set[str]:
        """Which of ``names`` exist as tables in the index's database or schema."""
        ...


class Backend(Protocol):
    """A database holding memory indexes."""

    kind: BackendKind

    def describe(self) -> str:
        """Where the index lives, as a user would name it (never a password)."""
        ...

    def read(self, work: Callable[[Tx], _T]) -> _T:
        """Run ``work`` in one read-only transaction that sees one snapshot."""
        ...

    def write(self, work: Callable[[Tx], _T]) -> _T:
        """Run ``work`` in one short write transaction, committed whole or not at all.

        ``work`` may run more than once (a deadlock or serialization failure is retried), so
        it must not have effects outside the transaction.
        """
        ...

    def lock(self, name: str, *, timeout: float) -> AbstractContextManager[None]:
        """Hold the user lock ``name`` for the block, waiting at most ``timeout`` seconds."""
        ...

    def try_lock(self, name: str) -> AbstractContextManager[bool]:
        """Hold the user lock ``name`` for the block if it is free; the block gets whether."""
        ...

    def close(self) -> None:
        """Release every connection; safe to call twice."""
        ...
