"""The plugin's errors: bad records and timestamps, unusable stores, extras, model endpoints.

Every class descends from ``kernel.errors.AffectMemoryError`` (a ``ValueError``), so the CLI
turns any of them into exit status 2 with one line on stderr.
"""

from __future__ import annotations

from kernel.errors import AffectMemoryError, EngineError, InvalidInputError, MalformedOutputError

__all__ = [
    "EmbeddingError",
    "GateUnavailableError",
    "IsolationError",
    "LegacyLayoutError",
    "MalformedGateReplyError",
    "MalformedResponseError",
    "MalformedStreamError",
    "MissingExtraError",
    "ModelAdapterError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelStreamError",
    "ModelTimeoutError",
    "RecordError",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TimestampError",
    "WrongSpaceError",
]


class TimestampError(InvalidInputError):
    """A timestamp is naive, unparsable, not finite or outside the years 1970-9999."""


class RecordError(InvalidInputError):
    """A memory record (or a line of a records file) failed validation; nothing was written."""


class StoreError(AffectMemoryError):
    """The Chroma store cannot be used as asked; the message says how to fix it."""


class StoreLockedError(StoreError):
    """Another process holds the embedded store; use a Chroma server for several processes."""


class StoreUnavailableError(StoreError):
    """The Chroma server or data directory could not be reached or opened."""


class LegacyLayoutError(StoreError):
    """The store keeps every user in one shared collection (the layout before per-user
    collections); ``affect-memory migrate`` moves it."""


class WrongSpaceError(StoreError):
    """An existing collection does not use cosine distance and cannot be converted."""


class IsolationError(StoreError):
    """Chroma returned a memory outside the requested user's scope; nothing was returned."""


class EmbeddingError(AffectMemoryError):
    """The embedder produced output of the wrong shape, type or values."""


class MissingExtraError(AffectMemoryError):
    """An optional dependency is not installed; the message names the extra to install."""


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
