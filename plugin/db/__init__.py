"""Database plumbing shared by the conversation state stores (``state/``) and the memory
index (``memory/index/``): ``location`` (the one parser of "a SQLite path or a PostgreSQL URL"),
``file_locks`` (per-key locks across processes on one host), ``sqlite_connections`` and
``postgres_connections`` (one connection pool per database, ``DEFAULT_POOL_SIZE`` unless told).
Nothing here imports ``state/`` or ``memory/``.
"""

__all__ = ["DEFAULT_POOL_SIZE"]

DEFAULT_POOL_SIZE = 10
"""Connections a pool keeps per process, for both databases and both users (the state store
and the memory index): PostgreSQL's open sessions at most, SQLite's worker threads and idle
connections. A PostgreSQL state store's ``pool_size`` (``?pool_size=N`` in its URL) overrides
it; a SQLite state store always uses it."""
