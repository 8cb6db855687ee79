"""affect-memory plugin."""

from kernel import __version__
from plugin.chroma_memory import ChromaMemory
from plugin.embeddings import SentenceTransformerEmbedder
from plugin.records import MemoryRecord
from plugin.sqlite_store import SQLiteStateStore

__all__ = [
    "ChromaMemory",
    "MemoryRecord",
    "SQLiteStateStore",
    "SentenceTransformerEmbedder",
    "__version__",
]
