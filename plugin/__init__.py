"""affect-memory's plugin: Chroma memory, state stores, models, the intent gate and the doors.

Everything a user imports is here (``from plugin import ChromaMemory, SQLiteStateStore``), and
every name loads on first use (PEP 562): ``import plugin`` imports nothing heavy, so the CLI's
``--help`` and the commands that load no model start at once, and ``PostgresStateStore`` (the
``postgres`` extra) and ``AffectMemoryRetriever`` (the ``langchain`` extra) need their extra only
when used. The embedding model loads only when something embeds.
"""

import typing as _typing

if _typing.TYPE_CHECKING:
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
    from plugin.gate.classifier import (
        EmbeddingIntentGate,
        IntentPrediction,
    )
    from plugin.gate.cues import (
        DEFAULT_RETRIEVAL_RULE,
        RetrievalRule,
    )
    from plugin.gate.evaluation import EvaluationReport
    from plugin.gate.exemplars import (
        IntentExemplars,
        load_exemplars,
    )
    from plugin.gate.params import (
        DEFAULT_GATE_PARAMS,
        GateParams,
    )
    from plugin.integrations.langchain import AffectMemoryRetriever
    from plugin.memory.adopt import AdoptedCollection, FieldMapping
    from plugin.memory.collections import (
        DEFAULT_HNSW,
        HnswParams,
    )
    from plugin.memory.effects import (
        DefaultMemoryWritePolicy,
        MemoryTurnEffects,
        MemoryWritePolicy,
        ReplayReport,
    )
    from plugin.memory.migrate import MigrationReport, migrate_store
    from plugin.memory.records import MemoryRecord
    from plugin.memory.results import (
        MemoryStats,
        RecallHit,
        RecallQuery,
        RecallResult,
        Relevance,
        TurnWriteReport,
        WriteReport,
    )
    from plugin.memory.retriever import UserRetriever
    from plugin.memory.settings import (
        DEFAULT_RECALL_SETTINGS,
        DENSE_RECALL,
        RECALL_WEIGHTS,
        RecallSettings,
        load_recall_settings,
        write_recall_settings,
    )
    from plugin.memory.store import ChromaMemory
    from plugin.models.embeddings import (
        Embedder,
        SentenceTransformerEmbedder,
        default_embedder,
    )
    from plugin.models.onnx_embedder import OnnxEmbedder
    from plugin.models.openai_adapter import OpenAICompatibleModel
    from plugin.state.location import open_state_store
    from plugin.state.postgres import PostgresStateStore
    from plugin.state.sqlite import (
        QuarantinedOutboxItem,
        SQLiteStateStore,
    )

_EXPORTS = {
    "DEFAULT_GATE_PARAMS": "plugin.gate.params",
    "DEFAULT_HNSW": "plugin.memory.collections",
    "DEFAULT_RECALL_SETTINGS": "plugin.memory.settings",
    "DEFAULT_RETRIEVAL_RULE": "plugin.gate.cues",
    "DENSE_RECALL": "plugin.memory.settings",
    "RECALL_WEIGHTS": "plugin.memory.settings",
    "AdoptedCollection": "plugin.memory.adopt",
    "AffectMemoryRetriever": "plugin.integrations.langchain",
    "ChatConfigError": "plugin.errors",
    "ChromaMemory": "plugin.memory.store",
    "DefaultMemoryWritePolicy": "plugin.memory.effects",
    "Embedder": "plugin.models.embeddings",
    "EmbeddingError": "plugin.errors",
    "EmbeddingIntentGate": "plugin.gate.classifier",
    "EvaluationReport": "plugin.gate.evaluation",
    "ExemplarError": "plugin.errors",
    "FieldMapping": "plugin.memory.adopt",
    "GateParams": "plugin.gate.params",
    "GateUnavailableError": "plugin.errors",
    "HnswParams": "plugin.memory.collections",
    "IntentExemplars": "plugin.gate.exemplars",
    "IntentPrediction": "plugin.gate.classifier",
    "IsolationError": "plugin.errors",
    "LegacyLayoutError": "plugin.errors",
    "LockTimeoutError": "plugin.errors",
    "MalformedGateReplyError": "plugin.errors",
    "MalformedResponseError": "plugin.errors",
    "MalformedStreamError": "plugin.errors",
    "MemoryRecord": "plugin.memory.records",
    "MemoryStats": "plugin.memory.results",
    "MemoryTurnEffects": "plugin.memory.effects",
    "MemoryWritePolicy": "plugin.memory.effects",
    "MigrationError": "plugin.errors",
    "MigrationReport": "plugin.memory.migrate",
    "MissingExtraError": "plugin.errors",
    "ModelAdapterError": "plugin.errors",
    "ModelConnectionError": "plugin.errors",
    "ModelHTTPError": "plugin.errors",
    "ModelStreamError": "plugin.errors",
    "ModelTimeoutError": "plugin.errors",
    "OnnxEmbedder": "plugin.models.onnx_embedder",
    "OpenAICompatibleModel": "plugin.models.openai_adapter",
    "PostgresStateStore": "plugin.state.postgres",
    "QuarantinedOutboxItem": "plugin.state.sqlite",
    "QueryFileError": "plugin.errors",
    "RecallHit": "plugin.memory.results",
    "RecallQuery": "plugin.memory.results",
    "RecallResult": "plugin.memory.results",
    "RecallSettings": "plugin.memory.settings",
    "RecordError": "plugin.errors",
    "Relevance": "plugin.memory.results",
    "ReplayReport": "plugin.memory.effects",
    "RetrievalRule": "plugin.gate.cues",
    "SQLiteStateStore": "plugin.state.sqlite",
    "SentenceTransformerEmbedder": "plugin.models.embeddings",
    "StoreError": "plugin.errors",
    "StoreLockedError": "plugin.errors",
    "StoreUnavailableError": "plugin.errors",
    "TimestampError": "plugin.errors",
    "TurnWriteReport": "plugin.memory.results",
    "UserRetriever": "plugin.memory.retriever",
    "WriteReport": "plugin.memory.results",
    "WrongSpaceError": "plugin.errors",
    "__version__": "kernel",
    "default_embedder": "plugin.models.embeddings",
    "load_exemplars": "plugin.gate.exemplars",
    "load_recall_settings": "plugin.memory.settings",
    "migrate_store": "plugin.memory.migrate",
    "open_state_store": "plugin.state.location",
    "write_recall_settings": "plugin.memory.settings",
}
"""Every public name and the module that defines it, imported when first used."""


def __getattr__(name: str) -> object:
    """Import a public name's module on first access and keep the name in the namespace."""
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'plugin' has no attribute {name!r}")
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
    "AffectMemoryRetriever",
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
