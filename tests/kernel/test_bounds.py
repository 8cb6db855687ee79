"""Reusable bounds: numbers, integers and zoned timestamps, with messages that name the bound."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from affect_memory.kernel.bounds import (
    MAX_CONVERSATION_ID_CHARS,
    CosineDistance,
    FiniteFloat,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    SignedUnit,
    UnitInterval,
    ZonedTimestamp,
    check_conversation_id,
    check_int,
    check_limit,
    check_number,
    parse_zoned,
    require_zoned_now,
)
from affect_memory.kernel.errors import InvalidInputError
from tests.kernel.strategies import PROPERTY


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(-10, 10), st.floats(-10, 10))
@PROPERTY
def test_check_number_accepts_exactly_the_closed_interval(value: float, a: float, b: float) -> None:
    low, high = sorted((a, b))
    if low <= value <= high:
        assert check_number(value, low, high) == value
    else:
        with pytest.raises(ValueError, match="must be within"):
            check_number(value, low, high)


@pytest.mark.parametrize("value", [1, Fraction(1, 2), np.float64(0.25), np.int64(1)])
def test_check_number_accepts_any_real_and_returns_a_float(value: Any) -> None:
    result = check_number(value, 0, 1)
    assert type(result) is float
    assert result == float(value)


@pytest.mark.parametrize(
    "value, message",
    [
        (True, "must be a number, got True"),
        (np.bool_(True), "must be a number"),
        ("1", "must be a number, got '1'"),
        (Decimal("0.5"), "must be a number"),
        (None, "must be a number"),
        (math.nan, "must be finite"),
        (math.inf, "must be finite"),
        (-math.inf, "must be finite"),
        (1.5, r"must be within \[0, 1\], got 1.5"),
        (-0.25, r"must be within \[-0.2, 1\], got -0.25"),
    ],
)
def test_check_number_refusals_name_the_problem_and_the_value(value: Any, message: str) -> None:
    low = -0.2 if value == -0.25 else 0.0
    with pytest.raises(ValueError, match=message):
        check_number(value, low, 1.0)


@pytest.mark.parametrize("value", [True, False, 1.0, "3", None, Decimal(2)])
def test_check_int_refuses_bool_floats_and_text(value: Any) -> None:
    with pytest.raises(ValueError, match="must be an integer"):
        check_int(value)


def test_check_int_applies_its_lower_bound() -> None:
    assert check_int(np.int64(3), 1) == 3
    assert check_int(0, 0) == 0
    with pytest.raises(ValueError, match=">= 1, got 0"):
        check_int(0, 1)


@pytest.mark.parametrize(
    "text, offset",
    [
        ("2026-01-01T00:00:00Z", timedelta(0)),
        ("2026-01-01T00:00:00+05:30", timedelta(hours=5, minutes=30)),
        ("2026-01-01T00:00:00.123456-08:00", timedelta(hours=-8)),
    ],
)
def test_parse_zoned_keeps_the_offset(text: str, offset: timedelta) -> None:
    assert parse_zoned(text).utcoffset() == offset


@pytest.mark.parametrize("bad", ["2026-01-01T00:00:00", "2026-01-01", datetime(2026, 1, 1)])
def test_parse_zoned_refuses_naive_values(bad: Any) -> None:
    with pytest.raises(ValueError, match="UTC offset"):
        parse_zoned(bad)


@pytest.mark.parametrize("bad", ["soon", "", "2026-13-01T00:00:00Z", 5, None])
def test_parse_zoned_refuses_what_is_not_iso(bad: Any) -> None:
    with pytest.raises(ValueError):
        parse_zoned(bad)


def test_parse_zoned_accepts_a_zoned_datetime() -> None:
    moment = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    assert parse_zoned(moment) is moment
    assert parse_zoned(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "kind, good, bad",
    [
        (UnitInterval, [0, 0.0, 0.5, 1], [-0.0001, 1.0001, True]),
        (SignedUnit, [-1, 0, 1.0], [-1.0001, 1.0001, False]),
        (CosineDistance, [0, 1.5, 2], [-0.1, 2.0001, True]),
        (FiniteFloat, [-1e300, 0, 1e300], [math.nan, math.inf, True, "1"]),
        (NonNegativeFloat, [0, 3.5], [-1e-9, math.inf, True]),
        (NonNegativeInt, [0, 7], [-1, 1.0, True]),
        (PositiveInt, [1, 7], [0, 1.0, True]),
    ],
)
def test_annotated_bounds_accept_and_refuse(kind: Any, good: list[Any], bad: list[Any]) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    for value in good:
        assert adapter.validate_python(value) == value
    for value in bad:
        with pytest.raises(ValidationError):
            adapter.validate_python(value)


def test_zoned_timestamp_type_refuses_naive_text() -> None:
    adapter: TypeAdapter[str] = TypeAdapter(ZonedTimestamp)
    assert adapter.validate_python("2026-01-01T00:00:00Z") == "2026-01-01T00:00:00Z"
    with pytest.raises(ValidationError, match="UTC offset"):
        adapter.validate_python("2026-01-01T00:00:00")


@pytest.mark.parametrize(
    ("value", "minimum", "message"),
    [
        (-1, 0, "limit must be >= 0, got -1"),
        (0, 1, "limit must be >= 1, got 0"),
        (True, 0, "limit must be an integer, got True"),
        (2.0, 0, "limit must be an integer, got 2.0"),
    ],
)
def test_check_limit_names_the_limit_and_the_value(
    value: object, minimum: int, message: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_limit(value, minimum=minimum)
    assert str(caught.value) == message
    assert check_limit(3, "batch", minimum=1) == 3


@pytest.mark.parametrize("bad", ["", "   ", "x" * (MAX_CONVERSATION_ID_CHARS + 1), 5, None])
def test_a_conversation_id_is_a_short_non_blank_string(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="at most 256 characters"):
        check_conversation_id(bad)
    assert check_conversation_id("x" * MAX_CONVERSATION_ID_CHARS) == "x" * 256


def test_now_must_be_zoned() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    assert require_zoned_now(moment) is moment
    for bad in (datetime(2026, 1, 1), "2026-01-01T00:00:00Z"):
        with pytest.raises(InvalidInputError, match="now must be a zoned datetime"):
            require_zoned_now(bad)
