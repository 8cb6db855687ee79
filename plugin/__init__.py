"""affect-memory plugin."""

from importlib.metadata import PackageNotFoundError, version

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

try:
    __version__: str = version("affect-memory")
    """The installed distribution's version (one number for kernel, plugin and the CLI)."""
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
