"""Reference adapters without I/O: an in-memory store, a scripted model, a static retriever,
and the base of a retriever that wraps another.

They are real implementations of the ``affect_memory.kernel.protocols`` seams, for tests and
examples.
"""

from affect_memory.kernel.adapters.delegating_retriever import DelegatingRetriever
from affect_memory.kernel.adapters.memory_store import InMemoryStateStore
from affect_memory.kernel.adapters.scripted_model import ScriptedModel, ScriptedReply
from affect_memory.kernel.adapters.static_retriever import StaticRetriever
from affect_memory.kernel.adapters.store_support import (
    HeldTransaction,
    PreparedCommit,
    check_outbox_ids,
    holding,
    prepare_commit,
)

__all__ = [
    "DelegatingRetriever",
    "HeldTransaction",
    "InMemoryStateStore",
    "PreparedCommit",
    "ScriptedModel",
    "ScriptedReply",
    "StaticRetriever",
    "check_outbox_ids",
    "holding",
    "prepare_commit",
]
