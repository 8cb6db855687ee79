"""The exception tree every affect-memory error descends from, and ``shown`` for echoing values.

The kernel's tree (the plugin adds its own leaves in ``affect_memory.errors``)::

    AffectMemoryError(Exception)
    ├── InvalidInputError(ValueError)      an argument failed validation
    │   ├── UnknownStageError              a strict ladder lacks the stage
    │   └── UnknownIntentError             neither built in nor registered
    ├── FixtureError(ValueError)           a conformance fixture cannot be used
    ├── EngineError                        a turn failed before commit
    │   ├── LimitExceededError(ValueError) a size or count limit was passed
    │   └── MalformedOutputError           an adapter returned the wrong thing
    └── StateStoreError                    a store could not do what was asked
        └── CorruptStateError              a stored row cannot be read back

Only errors about a caller's own values are also ``ValueError``s, so ``except ValueError``
keeps catching bad input; a timeout or a failing backend is not a ``ValueError``.
"""

from __future__ import annotations

__all__ = [
    "SHOWN_CHARS",
    "AffectMemoryError",
    "CorruptStateError",
    "EngineError",
    "FixtureError",
    "InvalidInputError",
    "LimitExceededError",
    "MalformedOutputError",
    "StateStoreError",
    "UnknownIntentError",
    "UnknownStageError",
    "shown",
]

SHOWN_CHARS = 200
"""Most characters of a bad value an error message repeats; longer ones are cut."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters with the full length.

    A 100,000-character query must not come back as a 100,000-character error line.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} in repr"
    return f"{text[:limit]}… ({size})"


class AffectMemoryError(Exception):
    """Base class of every error raised by affect-memory."""


class InvalidInputError(AffectMemoryError, ValueError):
    """An argument failed validation; the message names the argument and the bad value."""


class UnknownStageError(InvalidInputError):
    """A strict stage ladder was asked for a label it does not hold."""


class UnknownIntentError(InvalidInputError):
    """An intent is neither built in nor a registered custom label."""


class FixtureError(AffectMemoryError, ValueError):
    """A conformance fixture cannot be used: malformed, mistyped or inconsistent."""


class EngineError(AffectMemoryError):
    """A turn failed before commit; state and transcript are unchanged."""


class LimitExceededError(EngineError, ValueError):
    """A size or count limit of the engine was exceeded."""


class MalformedOutputError(EngineError):
    """An adapter returned something of the wrong type, count or size."""


class StateStoreError(AffectMemoryError):
    """A state store could not do what was asked; nothing of the failed call was written."""


class CorruptStateError(StateStoreError):
    """A stored row cannot be read back; the message names the conversation and the problem."""
