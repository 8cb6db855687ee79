"""The base of caller-owned parameter objects, and the name and text types they are built from.

A parameter object (dynamics, ladder, cues, labels, weights, limits) refuses every value
outside its domain when it is built, with an error naming ``Class.field`` and the bad value,
so a mistuned constant fails where it is written rather than deep inside a turn.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from affect_memory.kernel.errors import shown
from affect_memory.kernel.models import FrozenModel

__all__ = [
    "MAX_NAME_CHARS",
    "Name",
    "ParameterModel",
    "Text",
    "describe_first_error",
    "first_message",
    "unique",
]

MAX_NAME_CHARS = 64
"""Longest emotion, stage or intent name: what an emotion map and a relationship stage hold."""

Item = TypeVar("Item", bound=Hashable)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError(f"must not be empty or only whitespace, got {shown(value)}")
    return value


def _short_name(value: str) -> str:
    _non_blank(value)
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"must be at most {MAX_NAME_CHARS} characters, got {shown(value)}")
    return value


Text = Annotated[str, AfterValidator(_non_blank)]
"""A string with at least one non-whitespace character: a label or an instruction."""

Name = Annotated[str, AfterValidator(_short_name)]
"""A non-blank name of at most 64 characters: an emotion, a stage, an intent."""


def unique(values: Sequence[Item], what: str = "names") -> Sequence[Item]:
    """``values`` unchanged, or a ValueError naming the first value that repeats."""
    seen: set[Item] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} must be unique, got {shown(value)} twice")
        seen.add(value)
    return values


def describe_first_error(error: ValidationError) -> str:
    """The first problem of a validation error as ``location message, got value``."""
    detail = error.errors()[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in detail["loc"])
    message = str(detail["msg"]).removeprefix("Value error, ")
    if "got " not in message:
        message = f"{message[:1].lower()}{message[1:]}, got {shown(detail.get('input'))}"
    return f"{where} {message}" if where else message


def first_message(error: ValidationError) -> str:
    """The first problem of a parameter object's validation error, as one line.

    A parameter object's messages already name ``Class.field`` and the bad value.
    """
    return str(error.errors()[0]["msg"]).removeprefix("Value error, ")


class ParameterModel(FrozenModel):
    """Shared base of tunable parameter objects: every field error names ``Class.field``."""

    @field_validator("*", mode="wrap")
    @classmethod
    def _name_the_field(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        try:
            return handler(value)
        except ValidationError as error:
            # e.g. "StageLadder.weights[2] must be within [0, 1], got 1.5"
            detail = describe_first_error(error)
            separator = "" if detail.startswith(("[", ".")) else " "
            raise ValueError(f"{cls.__name__}.{info.field_name}{separator}{detail}") from None
