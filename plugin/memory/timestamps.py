"""Timestamp normalization at the adapter boundary: one canonical UTC form plus an epoch float.

Accepted: zoned ISO-8601 strings (an offset or ``Z``), zoned ``datetime`` objects and epoch
seconds (int or float, never bool). The canonical text is UTC with microseconds and an
explicit offset, ``2026-01-02T03:04:05.123456+00:00`` (what ``datetime.isoformat`` writes
for ``timespec="microseconds"``); the epoch is that instant in seconds, derived from the
canonical text. The text is authoritative: a float64 epoch holds every microsecond until
about 2242 and is within 15 microseconds up to 9999, enough for recency in days.
Naive, unparsable, non-finite or out-of-range values (years outside 1970-9999 in UTC)
raise ``TimestampError``, and so do strings with anything but printable ASCII (Python's
``fromisoformat`` would read ``'...Z\x00'`` as a timestamp) and zoned ``datetime``s whose wall
clock does not exist in their zone (a daylight-saving gap such as 02:30 on the night clocks
jump from 02:00 to 03:00): Python silently shifts those by the gap, so the instant stored would
not be the one written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from numbers import Real

from affect_memory.errors import TimestampError
from affect_memory.kernel.errors import shown

__all__ = [
    "MAX_EPOCH",
    "MIN_YEAR",
    "NormalizedTimestamp",
    "TimestampInput",
    "normalize_timestamp",
    "now_moment",
    "parse_datetime",
]

TimestampInput = str | datetime | int | float
"""Any form ``normalize_timestamp`` accepts."""

MIN_YEAR = 1970
"""Earliest UTC year accepted: epoch seconds below zero are almost always a unit mistake."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_EPOCH = (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - _EPOCH).total_seconds()
"""Latest epoch seconds accepted (the last whole second of year 9999, UTC)."""


@dataclass(frozen=True, slots=True)
class NormalizedTimestamp:
    """One instant: canonical UTC ISO text, epoch seconds and the zoned datetime."""

    iso: str
    epoch: float
    moment: datetime


def _where(field: str, record: str | None) -> str:
    return f"{record}: {field}" if record else field


def _from_moment(moment: datetime, label: str, value: object) -> NormalizedTimestamp:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TimestampError(
            f"{label} must carry a UTC offset or 'Z' (naive timestamps are ambiguous), "
            f"got {shown(value)}"
        )
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        raise TimestampError(
            f"{label} is outside the years {MIN_YEAR}-9999, got {shown(value)}"
        ) from None
    if utc.year < MIN_YEAR:
        raise TimestampError(f"{label} is outside the years {MIN_YEAR}-9999, got {shown(value)}")
    _check_wall_clock_exists(moment, utc, label, value)
    delta = utc - _EPOCH
    epoch = delta / timedelta(seconds=1)
    return NormalizedTimestamp(utc.isoformat(timespec="microseconds"), epoch, utc)


def _check_wall_clock_exists(
    moment: datetime, utc: datetime, label: str, value: object
) -> None:
    """Refuse a local time its zone skips: the round trip through UTC must give it back."""
    try:
        back = utc.astimezone(moment.tzinfo)
    except OverflowError:  # the far edges of the range; fixed offsets cannot have gaps
        return
    if back.replace(tzinfo=None, fold=0) != moment.replace(tzinfo=None, fold=0):
        raise TimestampError(
            f"{label} does not exist in its time zone {moment.tzinfo} (a daylight-saving "
            f"gap: the clocks skip it, and {moment.replace(tzinfo=None).isoformat()} there "
            f"would be stored as {back.isoformat()}), got {shown(value)}"
        )


def normalize_timestamp(
    value: object, *, field: str = "timestamp", record: str | None = None
) -> NormalizedTimestamp:
    """Normalize one accepted timestamp form; errors name ``record``, ``field`` and the value."""
    label = _where(field, record)
    if isinstance(value, datetime):
        return _from_moment(value, label, value)
    if isinstance(value, str):
        try:
            if not (value.isascii() and value.isprintable()):
                raise ValueError("not printable ASCII")
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise TimestampError(
                f"{label} is not an ISO-8601 timestamp, got {shown(value)} "
                "(expected e.g. '2026-01-02T03:04:05Z' or '2026-01-02T04:04:05+01:00')"
            ) from None
        return _from_moment(moment, label, value)
    if isinstance(value, Real) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise TimestampError(f"{label} must be finite epoch seconds, got {shown(value)}")
        if not 0.0 <= seconds <= MAX_EPOCH:
            raise TimestampError(
                f"{label} is outside the years {MIN_YEAR}-9999, got {shown(value)}"
            )
        try:
            moment = _EPOCH + timedelta(seconds=seconds)
        except OverflowError:
            raise TimestampError(
                f"{label} is outside the years {MIN_YEAR}-9999, got {shown(value)}"
            ) from None
        return _from_moment(moment, label, value)
    raise TimestampError(
        f"{label} must be a zoned ISO-8601 string, a zoned datetime or epoch seconds, "
        f"got {shown(value)}"
    )


def now_moment(now: object) -> datetime:
    """The instant a ``now`` argument names (any ``TimestampInput``), or the clock's for None;
    a bad value is refused naming the field ``now``."""
    return datetime.now(UTC) if now is None else normalize_timestamp(now, field="now").moment


def parse_datetime(
    value: object, *, field: str = "timestamp", record: str | None = None
) -> datetime:
    """The zoned UTC ``datetime`` of an accepted timestamp form."""
    return normalize_timestamp(value, field=field, record=record).moment
