"""Reusable validated number and text types, and the checks every kernel module shares.

Each check names the bound and the bad value.
"""

from __future__ import annotations

import math
from datetime import datetime
from numbers import Integral, Real
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = [
    "MAX_CONVERSATION_ID_CHARS",
    "CosineDistance",
    "FiniteFloat",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveInt",
    "SignedUnit",
    "UnitInterval",
    "ZonedTimestamp",
    "check_conversation_id",
    "check_int",
    "check_limit",
    "check_number",
    "parse_zoned",
    "require_zoned_now",
]

MAX_CONVERSATION_ID_CHARS = 256
"""Longest conversation id an engine or a store accepts."""


def check_number(value: Any, low: float = -math.inf, high: float = math.inf) -> float:
    """Return ``value`` as a float, refusing bool, non-numbers, NaN, infinities and out-of-range."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"must be a number, got {shown(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"must be finite, got {shown(value)}")
    if not low <= number <= high:
        raise ValueError(f"must be within [{_fmt(low)}, {_fmt(high)}], got {shown(value)}")
    return number


def check_int(value: Any, low: int | None = None) -> int:
    """Return ``value`` as an int, refusing bool, floats and values below ``low``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"must be an integer, got {shown(value)}")
    number = int(value)
    if low is not None and number < low:
        raise ValueError(f"must be >= {low}, got {shown(value)}")
    return number


def parse_zoned(value: str | datetime) -> datetime:
    """Parse a zoned ISO-8601 string (or accept a zoned datetime); naive values are refused."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"is not an ISO-8601 timestamp: {shown(value)}") from None
    else:
        raise ValueError(f"must be an ISO-8601 string, got {shown(value)}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(
            f"must carry a UTC offset or 'Z' (naive timestamps are ambiguous): {shown(value)}"
        )
    return moment


def check_limit(value: object, name: str = "limit", *, minimum: int = 0) -> int:
    """A count limit: an int of at least ``minimum`` (bool and floats refused).

    Raises ``InvalidInputError`` starting with ``name``, e.g. ``limit must be >= 1, got 0``.
    """
    try:
        return check_int(value, minimum)
    except ValueError as error:
        raise InvalidInputError(f"{name} {error}") from None


def check_conversation_id(conversation_id: object) -> str:
    """The id when it is a non-empty, non-blank string of at most 256 characters."""
    if (
        not isinstance(conversation_id, str)
        or not conversation_id.strip()
        or len(conversation_id) > MAX_CONVERSATION_ID_CHARS
    ):
        raise InvalidInputError(
            "conversation_id must be a non-empty string of at most "
            f"{MAX_CONVERSATION_ID_CHARS} characters, got {conversation_id!r}"
        )
    return conversation_id


def require_zoned_now(now: object) -> datetime:
    """``now`` when it is a zoned ``datetime``: the instant ranking and recency are scored at."""
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"now must be a zoned datetime, got {now!r}")
    return now


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _bounded(low: float, high: float) -> BeforeValidator:
    return BeforeValidator(lambda value: check_number(value, low, high))


def _zoned_text(value: Any) -> Any:
    if isinstance(value, str):
        parse_zoned(value)
    return value


FiniteFloat = Annotated[float, _bounded(-math.inf, math.inf)]
"""Any finite float; bool, NaN and infinities are refused."""

NonNegativeFloat = Annotated[float, _bounded(0.0, math.inf)]
"""A finite float >= 0."""

UnitInterval = Annotated[float, _bounded(0.0, 1.0)]
"""A float in [0, 1]."""

SignedUnit = Annotated[float, _bounded(-1.0, 1.0)]
"""A float in [-1, 1]."""

CosineDistance = Annotated[float, _bounded(0.0, 2.0)]
"""A cosine distance, ``1 - cos``, in [0, 2]."""

NonNegativeInt = Annotated[int, BeforeValidator(lambda value: check_int(value, 0))]
"""An int >= 0; bool and floats are refused."""

PositiveInt = Annotated[int, BeforeValidator(lambda value: check_int(value, 1))]
"""An int >= 1; bool and floats are refused."""

ZonedTimestamp = Annotated[str, AfterValidator(_zoned_text)]
"""An ISO-8601 string that carries a UTC offset."""
