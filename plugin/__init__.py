"""affect-memory's plugin: Chroma memory, state stores, models, the intent gate and the doors.

Everything a user imports is here (``from plugin import ChromaMemory, SQLiteStateStore``).
``PostgresStateStore`` (the ``postgres`` extra) and ``AffectMemoryRetriever`` (the ``langchain``
extra) load on first use, so ``import plugin`` never needs an optional dependency; the
embedding model loads only when something embeds.
"""

from kernel import __version__
from plugin.errors import (
    ChatConfigError,
    EmbeddingError,
    ExemplarError,
    GateUnavailableError,
    IsolationError,
    LegacyLayoutError,
    LockTimeoutError,
    MalformedGateReplyError,
    MalformedResponseError,
    MalformedStreamError,
    MissingExtraError,
    ModelAdapterError,
    ModelConnectionError,
    ModelHTTPError,
    ModelStreamError,
    ModelTimeoutError,
    QueryFileError,
    RecordError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
    TimestampError,
    WrongSpaceError,
)
from plugin.gate.classifier import EmbeddingIntentGate, IntentPrediction
from plugin.gate.cues import DEFAULT_RETRIEVAL_RULE, RetrievalRule
from plugin.gate.evaluation import EvaluationReport
from plugin.gate.exemplars import IntentExemplars, load_exemplars
from plugin.gate.params import DEFAULT_GATE_PARAMS, GateParams
from plugin.memory.collections import DEFAULT_HNSW, HnswParams
from plugin.memory.effects import (
    DefaultMemoryWritePolicy,
    MemoryTurnEffects,
    MemoryWritePolicy,
    ReplayReport,
)
from plugin.memory.records import MemoryRecord
from plugin.memory.results import (
    MemoryStats,
    RecallHit,
    RecallQuery,
    RecallResult,
    TurnWriteReport,
    WriteReport,
)
from plugin.memory.retriever import UserRetriever
from plugin.memory.store import ChromaMemory
from plugin.models.embeddings import Embedder, SentenceTransformerEmbedder
from plugin.models.openai_adapter import OpenAICompatibleModel
from plugin.state.location import open_state_store
from plugin.state.sqlite import QuarantinedOutboxItem, SQLiteStateStore

_LAZY = {
    "AffectMemoryRetriever": "plugin.integrations.langchain",
    "PostgresStateStore": "plugin.state.postgres",
}
"""Names whose module needs an optional extra, imported on first access."""


def __getattr__(name: str) -> object:
    """``PostgresStateStore`` and ``AffectMemoryRetriever``, imported when first used."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'plugin' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_GATE_PARAMS",
    "DEFAULT_HNSW",
    "DEFAULT_RETRIEVAL_RULE",
    "AffectMemoryRetriever",
    "ChatConfigError",
    "ChromaMemory",
    "DefaultMemoryWritePolicy",
    "Embedder",
    "EmbeddingError",
    "EmbeddingIntentGate",
    "EvaluationReport",
    "ExemplarError",
    "GateParams",
    "GateUnavailableError",
    "HnswParams",
    "IntentExemplars",
    "IntentPrediction",
    "IsolationError",
    "LegacyLayoutError",
    "LockTimeoutError",
    "MalformedGateReplyError",
    "MalformedResponseError",
    "MalformedStreamError",
    "MemoryRecord",
    "MemoryStats",
    "MemoryTurnEffects",
    "MemoryWritePolicy",
    "MissingExtraError",
    "ModelAdapterError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelStreamError",
    "ModelTimeoutError",
    "OpenAICompatibleModel",
    "PostgresStateStore",
    "QuarantinedOutboxItem",
    "QueryFileError",
    "RecallHit",
    "RecallQuery",
    "RecallResult",
    "RecordError",
    "ReplayReport",
    "RetrievalRule",
    "SQLiteStateStore",
    "SentenceTransformerEmbedder",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TimestampError",
    "TurnWriteReport",
    "UserRetriever",
    "WriteReport",
    "WrongSpaceError",
    "__version__",
    "load_exemplars",
    "open_state_store",
]
