"""affect-memory's plugin: Chroma memory, state stores, models, the intent gate and the doors.

Everything a user imports is here (``from affect_memory import ChromaMemory, SQLiteStateStore``),
and every name loads on first use (PEP 562): ``import affect_memory`` imports nothing heavy, so the
CLI's ``--help`` and the commands that load no model start at once, and ``PostgresStateStore`` (the
``postgres`` extra), ``AffectMemoryRetriever`` (the ``langchain`` extra) and the LlamaIndex pair
(the ``llamaindex`` extra) need their extra only when used. The embedding model loads only when
something embeds.
"""

import typing as _typing

if _typing.TYPE_CHECKING:
    from affect_memory.cues import (
        DEFAULT_RETRIEVAL_RULE,
        RetrievalRule,
    )
    from affect_memory.errors import (
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
        MigrationError,
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
    from affect_memory.gate.classifier import (
        EmbeddingIntentGate,
        IntentPrediction,
    )
    from affect_memory.gate.evaluation import EvaluationReport
    from affect_memory.gate.exemplars import (
        IntentExemplars,
        load_exemplars,
    )
    from affect_memory.gate.params import (
        DEFAULT_GATE_PARAMS,
        GateParams,
    )
    from affect_memory.integrations.langchain import AffectMemoryRetriever
    from affect_memory.integrations.llamaindex import (
        AffectMemoryLlamaRetriever,
        AffectRankingPostprocessor,
    )
    from affect_memory.kernel import __version__
    from affect_memory.memory.admin.adopt import AdoptedCollection, FieldMapping
    from affect_memory.memory.admin.migrate import MigrationReport, migrate_store
    from affect_memory.memory.chroma.collections import (
        DEFAULT_HNSW,
        HnswParams,
    )
    from affect_memory.memory.records import MemoryRecord
    from affect_memory.memory.results import (
        MemoryStats,
        RecallHit,
        RecallQuery,
        RecallResult,
        Relevance,
        TurnWriteReport,
        WriteReport,
    )
    from affect_memory.memory.retriever import UserRetriever
    from affect_memory.memory.settings import (
        DEFAULT_RECALL_SETTINGS,
        DENSE_RECALL,
        RECALL_WEIGHTS,
        RecallSettings,
        load_recall_settings,
        write_recall_settings,
    )
    from affect_memory.memory.store import ChromaMemory
    from affect_memory.memory.turns.effects import (
        DefaultMemoryWritePolicy,
        MemoryTurnEffects,
        MemoryWritePolicy,
        ReplayReport,
    )
    from affect_memory.models.embeddings import (
        Embedder,
        SentenceTransformerEmbedder,
        default_embedder,
    )
    from affect_memory.models.onnx_embedder import OnnxEmbedder
    from affect_memory.models.openai_adapter import OpenAICompatibleModel
    from affect_memory.state.location import open_state_store
    from affect_memory.state.postgres import PostgresStateStore
    from affect_memory.state.sqlite import (
        QuarantinedOutboxItem,
        SQLiteStateStore,
    )

_EXPORTS = {
    "DEFAULT_GATE_PARAMS": "affect_memory.gate.params",
    "DEFAULT_HNSW": "affect_memory.memory.chroma.collections",
    "DEFAULT_RECALL_SETTINGS": "affect_memory.memory.settings",
    "DEFAULT_RETRIEVAL_RULE": "affect_memory.cues",
    "DENSE_RECALL": "affect_memory.memory.settings",
    "RECALL_WEIGHTS": "affect_memory.memory.settings",
    "AdoptedCollection": "affect_memory.memory.admin.adopt",
    "AffectMemoryLlamaRetriever": "affect_memory.integrations.llamaindex",
    "AffectMemoryRetriever": "affect_memory.integrations.langchain",
    "AffectRankingPostprocessor": "affect_memory.integrations.llamaindex",
    "ChatConfigError": "affect_memory.errors",
    "ChromaMemory": "affect_memory.memory.store",
    "DefaultMemoryWritePolicy": "affect_memory.memory.turns.effects",
    "Embedder": "affect_memory.models.embeddings",
    "EmbeddingError": "affect_memory.errors",
    "EmbeddingIntentGate": "affect_memory.gate.classifier",
    "EvaluationReport": "affect_memory.gate.evaluation",
    "ExemplarError": "affect_memory.errors",
    "FieldMapping": "affect_memory.memory.admin.adopt",
    "GateParams": "affect_memory.gate.params",
    "GateUnavailableError": "affect_memory.errors",
    "HnswParams": "affect_memory.memory.chroma.collections",
    "IntentExemplars": "affect_memory.gate.exemplars",
    "IntentPrediction": "affect_memory.gate.classifier",
    "IsolationError": "affect_memory.errors",
    "LegacyLayoutError": "affect_memory.errors",
    "LockTimeoutError": "affect_memory.errors",
    "MalformedGateReplyError": "affect_memory.errors",
    "MalformedResponseError": "affect_memory.errors",
    "MalformedStreamError": "affect_memory.errors",
    "MemoryRecord": "affect_memory.memory.records",
    "MemoryStats": "affect_memory.memory.results",
    "MemoryTurnEffects": "affect_memory.memory.turns.effects",
    "MemoryWritePolicy": "affect_memory.memory.turns.effects",
    "MigrationError": "affect_memory.errors",
    "MigrationReport": "affect_memory.memory.admin.migrate",
    "MissingExtraError": "affect_memory.errors",
    "ModelAdapterError": "affect_memory.errors",
    "ModelConnectionError": "affect_memory.errors",
    "ModelHTTPError": "affect_memory.errors",
    "ModelStreamError": "affect_memory.errors",
    "ModelTimeoutError": "affect_memory.errors",
    "OnnxEmbedder": "affect_memory.models.onnx_embedder",
    "OpenAICompatibleModel": "affect_memory.models.openai_adapter",
    "PostgresStateStore": "affect_memory.state.postgres",
    "QuarantinedOutboxItem": "affect_memory.state.sqlite",
    "QueryFileError": "affect_memory.errors",
    "RecallHit": "affect_memory.memory.results",
    "RecallQuery": "affect_memory.memory.results",
    "RecallResult": "affect_memory.memory.results",
    "RecallSettings": "affect_memory.memory.settings",
    "RecordError": "affect_memory.errors",
    "Relevance": "affect_memory.memory.results",
    "ReplayReport": "affect_memory.memory.turns.effects",
    "RetrievalRule": "affect_memory.cues",
    "SQLiteStateStore": "affect_memory.state.sqlite",
    "SentenceTransformerEmbedder": "affect_memory.models.embeddings",
    "StoreError": "affect_memory.errors",
    "StoreLockedError": "affect_memory.errors",
    "StoreUnavailableError": "affect_memory.errors",
    "TimestampError": "affect_memory.errors",
    "TurnWriteReport": "affect_memory.memory.results",
    "UserRetriever": "affect_memory.memory.retriever",
    "WriteReport": "affect_memory.memory.results",
    "WrongSpaceError": "affect_memory.errors",
    "__version__": "affect_memory.kernel",
    "default_embedder": "affect_memory.models.embeddings",
    "load_exemplars": "affect_memory.gate.exemplars",
    "load_recall_settings": "affect_memory.memory.settings",
    "migrate_store": "affect_memory.memory.admin.migrate",
    "open_state_store": "affect_memory.state.location",
    "write_recall_settings": "affect_memory.memory.settings",
}
"""Every public name and the module that defines it, imported when first used."""


def __getattr__(name: str) -> object:
    """Import a public name's module on first access and keep the name in the namespace."""
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'affect_memory' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not, beside the module's own attributes."""
    return sorted({*globals(), *__all__})


__all__ = [
    "DEFAULT_GATE_PARAMS",
    "DEFAULT_HNSW",
    "DEFAULT_RECALL_SETTINGS",
    "DEFAULT_RETRIEVAL_RULE",
    "DENSE_RECALL",
    "RECALL_WEIGHTS",
    "AdoptedCollection",
    "AffectMemoryLlamaRetriever",
    "AffectMemoryRetriever",
    "AffectRankingPostprocessor",
    "ChatConfigError",
    "ChromaMemory",
    "DefaultMemoryWritePolicy",
    "Embedder",
    "EmbeddingError",
    "EmbeddingIntentGate",
    "EvaluationReport",
    "ExemplarError",
    "FieldMapping",
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
    "MigrationError",
    "MigrationReport",
    "MissingExtraError",
    "ModelAdapterError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelStreamError",
    "ModelTimeoutError",
    "OnnxEmbedder",
    "OpenAICompatibleModel",
    "PostgresStateStore",
    "QuarantinedOutboxItem",
    "QueryFileError",
    "RecallHit",
    "RecallQuery",
    "RecallResult",
    "RecallSettings",
    "RecordError",
    "Relevance",
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
    "default_embedder",
    "load_exemplars",
    "load_recall_settings",
    "migrate_store",
    "open_state_store",
    "write_recall_settings",
]
