"""The memory index: lexical search, recall counts and a copy of every row beside Chroma.

**Which store is the truth.** Chroma is the truth for *what* each memory is: its id, text,
metadata and vector. The index is the truth for what Chroma cannot keep exactly, the recall
counts (an atomic increment per surfaced memory; Chroma has no compare-and-set, so counts
kept there lost increments across processes), and it keeps a derived copy of everything else
(postings, the fields ranking reads, the embedding) so a recall reads one database and not
two. Why this way round: Chroma's write is the one that can fail half-seen (a server timeout
that lands later, a segment a kill tore), so every write is announced in the index's journal
first and settled by asking Chroma what it holds (``consistency/``); the copy is what
rebuilds a torn Chroma segment (``affect_memory.memory.chroma.segment_repair``), and a
backfill rebuilds the copy from Chroma.

Rooms: ``lexical/`` (analyzer, BM25, search), ``storage/`` (backends, schema, where an index
lives), ``consistency/`` (documents, journal, session, sync, rehearsal), and
``memory_index`` (``MemoryIndex``, the one object the store talks to).
"""

from affect_memory.memory.index.consistency.rehearsal import RecallOutcome, Rehearsal
from affect_memory.memory.index.consistency.sync import SyncReport
from affect_memory.memory.index.lexical.search import LexicalHits
from affect_memory.memory.index.memory_index import IndexAudit, MemoryIndex

__all__ = ["IndexAudit", "LexicalHits", "MemoryIndex", "RecallOutcome", "Rehearsal", "SyncReport"]
