"""Exact snapshots of a store's stored bytes, to prove a failed turn wrote nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def dump_sqlite(path: Path) -> list[str]:
    """Every schema statement and row of the database, including autoincrement counters."""
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()
