"""The memory index: lexical search, rehearsal counts and newest times beside Chroma, per user.

In reading order: ``analyzer`` (text to terms) and ``bm25`` (scoring), ``schema`` (one set of
tables and statements for SQLite and PostgreSQL), ``backend`` with ``sqlite_backend`` and
``postgres_backend``, ``documents`` (a user's indexed memories), ``lexical`` and
``rehearsal`` (what ranking reads), ``journal``, ``sync`` and ``session`` (how every Chroma
write keeps the index consistent through a crash), ``memory_index`` (``MemoryIndex``) and
``opening`` (where an index lives).
"""

from affect_memory.memory.index.lexical import LexicalHits
from affect_memory.memory.index.memory_index import IndexAudit, MemoryIndex
from affect_memory.memory.index.rehearsal import RecallOutcome, Rehearsal
from affect_memory.memory.index.sync import SyncReport

__all__ = ["IndexAudit", "LexicalHits", "MemoryIndex", "RecallOutcome", "Rehearsal", "SyncReport"]
