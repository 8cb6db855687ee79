"""The plugin's errors: every one descends from ``affect_memory.kernel.errors.AffectMemoryError``.

The CLI turns any of them into exit status 2 with one line on stderr. Only errors about a
caller's own values are also ``ValueError``s (through ``InvalidInputError``); an unreachable
store, a timed-out lock or a failing model endpoint is not::

    AffectMemoryError
    ├── InvalidInputError(ValueError)
    │   ├── TimestampError              a timestamp cannot be stored as one instant
    │   ├── RecordError                 a memory record or records file is refused
    │   ├── ExemplarError               an exemplar set or custom intent is malformed
    │   ├── QueryFileError              a line of a classify input file is unusable
    │   └── ChatConfigError             the chat has no endpoint, model or usable key
    ├── StoreError                      the Chroma store cannot be used as asked
    │   ├── StoreLockedError            another process holds the embedded store
    │   ├── StoreUnavailableError       the server or directory cannot be reached
    │   ├── LegacyLayoutError           the store is in the old shared-collection layout
    │   ├── MigrationError              migrate stopped before removing the old collection
    │   ├── WrongSpaceError             a collection is not cosine
    │   └── IsolationError              a row or collection of another user turned up
    ├── EmbeddingError                  the embedder's output is unusable
    ├── MissingExtraError               an optional dependency is not installed
    ├── StateStoreError (kernel)
    │   └── LockTimeoutError            a conversation stayed held past the lock timeout
    └── EngineError (kernel)
        └── ModelAdapterError           a model endpoint failed or answered unusably
            ├── ModelTimeoutError, ModelConnectionError, ModelHTTPError, ModelStreamError
            ├── GateUnavailableError
            └── MalformedResponseError (also MalformedOutputError)
                ├── MalformedStreamError
                └── MalformedGateReplyError
"""

from __future__ import annotations

from affect_memory.kernel.errors import (
    AffectMemoryError,
    EngineError,
    InvalidInputError,
    MalformedOutputError,
    StateStoreError,
    shown,
)

__all__ = [
    "ChatConfigError",
    "EmbeddingError",
    "ExemplarError",
    "GateUnavailableError",
    "IsolationError",
    "LegacyLayoutError",
    "LockTimeoutError",
    "MalformedGateReplyError",
    "MalformedResponseError",
    "MalformedStreamError",
    "MigrationError",
    "MissingExtraError",
    "ModelAdapterError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelStreamError",
    "ModelTimeoutError",
    "QueryFileError",
    "RecordError",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TimestampError",
    "WrongSpaceError",
]


# -- bad input: also ValueErrors ------------------------------------------------------------


class TimestampError(InvalidInputError):
    """A timestamp is naive, unparsable, not finite or outside the years 1970-9999."""


class RecordError(InvalidInputError):
    """A memory record (or a line of a records file) failed validation; nothing was written."""


class ExemplarError(InvalidInputError):
    """An exemplar set or custom intent is malformed; the message names the place and the value."""


class QueryFileError(InvalidInputError):
    """A line of a ``--queries`` or ``--evaluate`` file is unusable; the message names the line."""


class ChatConfigError(InvalidInputError):
    """The chat cannot start: no model endpoint, no model name, or a missing API key."""


# -- the Chroma store ------------------------------------------------------------------------


class StoreError(AffectMemoryError):
    """The Chroma store cannot be used as asked; the message says how to fix it."""


class StoreLockedError(StoreError):
    """Another process holds the embedded store; use a Chroma server for several processes."""


class StoreUnavailableError(StoreError):
    """The Chroma server or data directory could not be reached or opened."""


class LegacyLayoutError(StoreError):
    """The store keeps every user in one shared collection (the layout before per-user
    collections); ``affect-memory migrate`` moves it."""


class MigrationError(StoreError):
    """``migrate`` stopped before removing the old collection; rerunning it resumes."""


class WrongSpaceError(StoreError):
    """An existing collection does not use cosine distance and cannot be converted."""


class IsolationError(StoreError):
    """Chroma returned a memory outside the requested user's scope; nothing was returned."""


class EmbeddingError(AffectMemoryError):
    """The embedder produced output of the wrong shape, type or values."""


class MissingExtraError(AffectMemoryError):
    """An optional dependency is not installed; the message names the extra to install."""


# -- state stores ----------------------------------------------------------------------------


class LockTimeoutError(StateStoreError):
    """A conversation stayed held by another turn for longer than the store's lock timeout."""

    def __init__(self, conversation_id: str, timeout: float, detail: str) -> None:
        """Name the conversation, the timeout and what held it."""
        super().__init__(
            f"gave up waiting for conversation {shown(conversation_id)} after {timeout:g} s "
            f"(lock_timeout): {detail}"
        )
        self.conversation_id = conversation_id
        self.timeout = timeout


# -- model adapters: EngineError subclasses, so a failing endpoint leaves the turn uncommitted --


class ModelAdapterError(EngineError):
    """A model endpoint failed, or answered something the adapter cannot use."""


class ModelTimeoutError(ModelAdapterError):
    """The endpoint did not connect, accept the request or send the next bytes in time."""


class ModelConnectionError(ModelAdapterError):
    """The endpoint could not be reached, or the connection broke before the reply was whole."""


class ModelHTTPError(ModelAdapterError):
    """The endpoint answered with a non-success HTTP status."""

    def __init__(self, message: str, *, status_code: int, body_excerpt: str) -> None:
        """Keep the status and a short excerpt of the body beside the message."""
        super().__init__(message)
        self.status_code = status_code
        self.body_excerpt = body_excerpt


class ModelStreamError(ModelAdapterError):
    """The endpoint reported an error object inside an otherwise well-formed stream."""


class MalformedResponseError(ModelAdapterError, MalformedOutputError):
    """The endpoint's reply does not follow the chat-completions wire format."""


class MalformedStreamError(MalformedResponseError):
    """A streamed reply broke the Server-Sent Events or chunk format, or ended without [DONE]."""


class MalformedGateReplyError(MalformedResponseError):
    """A model-backed gate answered something other than the strict JSON classification."""


class GateUnavailableError(ModelAdapterError):
    """No usable gate: none was passed and the default embedding gate cannot be loaded."""
