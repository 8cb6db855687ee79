"""The plugin's exceptions: backend failures translated at the boundary into the kernel's tree.

Every class descends from ``kernel.errors.EngineError``, so the engine treats any of them,
raised before commit, as a failed turn that leaves state and transcript unchanged.
"""

from __future__ import annotations

from kernel.errors import EngineError, MalformedOutputError

__all__ = [
    "GateUnavailableError",
    "MalformedGateReplyError",
    "MalformedResponseError",
    "MalformedStreamError",
    "ModelAdapterError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelStreamError",
    "ModelTimeoutError",
]


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
