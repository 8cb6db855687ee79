"""affect-memory plugin."""

from plugin.sqlite_store import SQLiteStateStore

__all__ = ["SQLiteStateStore"]
