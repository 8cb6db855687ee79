"""affect-memory plugin."""

from kernel import __version__
from plugin.memory.records import MemoryRecord
from plugin.memory.store import ChromaMemory
from plugin.models.embeddings import SentenceTransformerEmbedder
from plugin.state.sqlite import SQLiteStateStore

__all__ = [
    "ChromaMemory",
    "MemoryRecord",
    "SQLiteStateStore",
    "SentenceTransformerEmbedder",
    "__version__",
]
