"""Timestamp normalization: every accepted form names one instant; every bad one is refused."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affect_memory.errors import TimestampError
from affect_memory.kernel.errors import AffectMemoryError
from affect_memory.memory.batches import validate_records
from affect_memory.memory.timestamps import (
    MAX_EPOCH,
    normalize_timestamp,
    now_moment,
    parse_datetime,
)

CANONICAL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")
INSTANT = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "form",
    [
        "2026-01-02T03:04:05.123456Z",
        "2026-01-02T03:04:05.123456+00:00",
        "2026-01-02T04:04:05.123456+01:00",
        "2026-01-01T22:04:05.123456-05:00",
        "2026-01-02T08:34:05.123456+05:30",
        INSTANT,
        INSTANT.astimezone(timezone(timedelta(hours=-9))),
        1767323045.123456,
    ],
)
def test_every_accepted_form_normalizes_to_the_same_instant(form: object) -> None:
    normalized = normalize_timestamp(form)
    assert normalized.iso == "2026-01-02T03:04:05.123456+00:00"
    assert normalized.epoch == 1767323045.123456
    assert normalized.moment == INSTANT and normalized.moment.tzinfo is UTC


def test_whole_seconds_and_integers_keep_the_canonical_form() -> None:
    assert normalize_timestamp(0).iso == "1970-01-01T00:00:00.000000+00:00"
    assert normalize_timestamp("2026-01-02T03:04:05Z").iso == "2026-01-02T03:04:05.000000+00:00"
    assert normalize_timestamp(MAX_EPOCH).iso == "9999-12-31T23:59:59.000000+00:00"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("2026-01-02T03:04:05", "must carry a UTC offset"),
        ("2026-01-02", "must carry a UTC offset"),
        (datetime(2026, 1, 2), "must carry a UTC offset"),
        ("next tuesday", "not an ISO-8601 timestamp"),
        ("", "not an ISO-8601 timestamp"),
        ("2026-01-02T03:04:05Z\x00", "not an ISO-8601 timestamp"),  # Python alone accepts it
        ("2026-01-02T03:04:05\x00Z", "not an ISO-8601 timestamp"),
        ("2026-01-02T03:04:05Z\t", "not an ISO-8601 timestamp"),
        ("2026-01-02\u200bT03:04:05Z", "not an ISO-8601 timestamp"),
        (float("nan"), "finite"),
        (float("-inf"), "finite"),
        (-0.5, "outside the years 1970-9999"),
        (MAX_EPOCH + 1, "outside the years 1970-9999"),
        (1e300, "outside the years 1970-9999"),
        ("1969-12-31T23:59:59Z", "outside the years 1970-9999"),
        ("1970-01-01T00:30:00+01:00", "outside the years 1970-9999"),
        ("9999-12-31T23:00:00-05:00", "outside the years 1970-9999"),
        (True, "must be a zoned ISO-8601 string"),
        (None, "must be a zoned ISO-8601 string"),
        ([2026], "must be a zoned ISO-8601 string"),
    ],
)
def test_bad_timestamps_are_refused_naming_the_record_field_and_value(
    bad: object, message: str
) -> None:
    with pytest.raises(TimestampError) as raised:
        normalize_timestamp(bad, field="last_recalled_at", record="line 7")
    text = str(raised.value)
    assert text.startswith("line 7: last_recalled_at ") and message in text
    assert repr(bad) in text
    assert isinstance(raised.value, AffectMemoryError)


def test_a_wall_clock_time_its_zone_skips_is_refused() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    gap = datetime(2026, 3, 29, 2, 30, tzinfo=berlin)  # clocks jump from 02:00 to 03:00
    # Before: silently stored as 01:30 UTC, the instant of 03:30 local time.
    with pytest.raises(TimestampError) as raised:
        normalize_timestamp(gap, field="timestamp", record="record 4")
    message = str(raised.value)
    assert message.startswith("record 4: timestamp does not exist in its time zone Europe/Berlin")
    assert "daylight-saving gap" in message and repr(gap) in message
    with pytest.raises(TimestampError, match=r"record 0 \(id 'm'\): timestamp does not exist"):
        validate_records([{"id": "m", "text": "t", "user_id": "u", "timestamp": gap}])
    # The hour the clocks repeat exists twice: both instants are kept apart, not refused.
    first = normalize_timestamp(datetime(2026, 10, 25, 2, 30, tzinfo=berlin))
    second = normalize_timestamp(datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=berlin))
    assert (first.iso, second.iso) == (
        "2026-10-25T00:30:00.000000+00:00",
        "2026-10-25T01:30:00.000000+00:00",
    )
    assert normalize_timestamp(datetime(2026, 3, 29, 3, 30, tzinfo=berlin)).iso == (
        "2026-03-29T01:30:00.000000+00:00"
    )


def test_parse_datetime_returns_the_zoned_utc_moment() -> None:
    assert parse_datetime("2026-01-02T04:04:05.123456+01:00") == INSTANT


zones = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a loaded CI machine
@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31)),
    zones,
)
def test_any_zoned_moment_round_trips_through_text_and_epoch(
    naive: datetime, zone: timezone
) -> None:
    moment = naive.replace(tzinfo=zone)
    normalized = normalize_timestamp(moment)
    assert CANONICAL.match(normalized.iso)
    assert normalize_timestamp(normalized.iso) == normalized
    assert normalize_timestamp(moment.isoformat()) == normalized
    assert normalized.moment == moment
    # float64 epochs hold every microsecond until ~2255; later ones round to a few.
    resolution = max(1e-6, normalized.epoch * 2.0**-52)
    back = normalize_timestamp(normalized.epoch).moment
    assert abs((back - moment).total_seconds()) <= 2 * resolution


def test_now_is_the_instant_given_or_the_clocks() -> None:
    before = datetime.now(UTC)
    assert before <= now_moment(None) <= datetime.now(UTC)
    assert now_moment("2026-01-02T03:04:05.123456Z") == INSTANT
    assert now_moment(INSTANT.timestamp()) == INSTANT
    with pytest.raises(TimestampError, match="now"):
        now_moment("2026-01-02T03:04:05")  # naive: refused, naming the field
