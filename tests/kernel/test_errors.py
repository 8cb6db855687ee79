"""The kernel's error tree: one root, and only errors about a caller's values are ValueErrors."""

from __future__ import annotations

import pytest

from affect_memory.kernel import (
    AffectMemoryError,
    CorruptStateError,
    EngineError,
    FixtureError,
    InvalidInputError,
    LimitExceededError,
    MalformedOutputError,
    StateStoreError,
    UnknownIntentError,
    UnknownStageError,
)
from affect_memory.kernel.errors import shown


def test_the_root_is_not_a_value_error() -> None:
    assert issubclass(AffectMemoryError, Exception)
    assert not issubclass(AffectMemoryError, ValueError)


@pytest.mark.parametrize(
    "validation",
    [InvalidInputError, UnknownStageError, UnknownIntentError, LimitExceededError, FixtureError],
)
def test_validation_errors_are_value_errors(validation: type[AffectMemoryError]) -> None:
    assert issubclass(validation, AffectMemoryError) and issubclass(validation, ValueError)
    with pytest.raises(ValueError, match="bad"):
        raise validation("bad")


@pytest.mark.parametrize(
    "failure", [EngineError, MalformedOutputError, StateStoreError, CorruptStateError]
)
def test_failures_of_a_backend_or_adapter_are_not_value_errors(
    failure: type[AffectMemoryError],
) -> None:
    assert issubclass(failure, AffectMemoryError) and not issubclass(failure, ValueError)


def test_limits_and_malformed_output_are_engine_errors() -> None:
    assert issubclass(LimitExceededError, EngineError)
    assert issubclass(MalformedOutputError, EngineError)
    assert issubclass(CorruptStateError, StateStoreError)


def test_shown_cuts_long_values_and_says_how_long() -> None:
    assert shown("short") == "'short'"
    long = shown("x" * 1000)
    assert long.startswith("'xxx") and long.endswith("… (1000 characters)")
    assert len(long) < 240
