"""The period a query names, and how far each memory lies from it.

Generic English date phrases, no topics, names or dataset phrases: ``named_period(text, now)``
is the span a query names, as epoch seconds ``(start, end)`` with the end exclusive. Absolute:
"3 July, 2023", "July 3, 2023", "July 2023", "summer 2021", "in 2022"; relative to ``now``:
"yesterday", "today", "last/this week|month|year" and "N days/weeks/months/years ago" (give or
take a quarter of N). A bare month or weekday without a year names nothing (it is ambiguous).
The words that say whether a query asks about now or the past are the query analyser's
lexicon (``affect_memory.memory.recall.plan``).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.retrieval import SECONDS_PER_DAY

__all__ = ["days_from_period", "named_period"]

_MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTH_NUMBERS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_MONTH = "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True))
_SEASON_MONTHS = {
    "spring": (3, 5),
    "summer": (6, 8),
    "autumn": (9, 11),
    "fall": (9, 11),
    "winter": (12, 2),
}
_COUNT_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_RELATIVE_SPANS = {
    # days back to the span's start, and to its end (negative: the end is tomorrow)
    "yesterday": (1, 0),
    "today": (0, -1),
    "last week": (14, 7),
    "this week": (7, -1),
    "last month": (61, 30),
    "this month": (31, -1),
    "last year": (730, 365),
    "this year": (365, -1),
}

_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b", re.IGNORECASE
)
_MONTH_DAY_YEAR = re.compile(
    rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.IGNORECASE
)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.IGNORECASE)
_SEASON_YEAR = re.compile(r"\b(spring|summer|autumn|fall|winter)\s+(?:of\s+)?(\d{4})\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since|from)\s+((?:19|20)\d\d)\b", re.IGNORECASE)
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE
)
_DIGIT = re.compile(r"\d")
_RELATIVE = re.compile(
    r"\b(yesterday|today|last\s+(?:week|month|year)|this\s+(?:week|month|year))\b", re.IGNORECASE
)

def _midnight(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _month_span(year: int, month: int) -> tuple[float, float]:
    days = calendar.monthrange(year, month)[1]
    return _midnight(year, month, 1), _midnight(year, month, days) + SECONDS_PER_DAY


def _dated_day(text: str) -> tuple[float, float] | None:
    for pattern, day_first in ((_DAY_MONTH_YEAR, True), (_MONTH_DAY_YEAR, False)):
        found = pattern.search(text)
        if found is None:
            continue
        first, second, year = found.groups()
        day, month = (first, second) if day_first else (second, first)
        try:
            start = _midnight(int(year), _MONTH_NUMBERS[month.lower()], int(day))
        except ValueError:  # "31 February, 2023" names no day
            continue
        return start, start + SECONDS_PER_DAY
    return None


def _dated_span(text: str) -> tuple[float, float] | None:
    if _DIGIT.search(text) is None:  # every dated span has a year (most questions have none)
        return None
    day = _dated_day(text)
    if day is not None:
        return day
    found = _MONTH_YEAR.search(text)
    if found is not None:
        return _month_span(int(found.group(2)), _MONTH_NUMBERS[found.group(1).lower()])
    found = _SEASON_YEAR.search(text)
    if found is not None:
        first, last = _SEASON_MONTHS[found.group(1).lower()]
        year = int(found.group(2))
        if first > last:  # winter YYYY: December YYYY to the end of February YYYY + 1
            return _month_span(year, 12)[0], _month_span(year + 1, 2)[1]
        return _month_span(year, first)[0], _month_span(year, last)[1]
    found = _YEAR.search(text)
    if found is not None:
        year = int(found.group(1))
        return _midnight(year, 1, 1), _midnight(year + 1, 1, 1)
    return None


def _relative_span(text: str, now: datetime) -> tuple[float, float] | None:
    reference = now.timestamp()
    found = _AGO.search(text)
    if found is not None:
        count_word = found.group(1).lower()
        count = int(count_word) if count_word.isdigit() else _COUNT_WORDS[count_word]
        days = _UNIT_DAYS[found.group(2).lower()] * count
        centre = reference - days * SECONDS_PER_DAY
        half = max(1.0, days * 0.25) * SECONDS_PER_DAY  # "3 weeks ago" is give or take 5 days
        return centre - half, centre + half
    found = _RELATIVE.search(text)
    if found is not None:
        back, until = _RELATIVE_SPANS[" ".join(found.group(1).lower().split())]
        return reference - back * SECONDS_PER_DAY, reference - until * SECONDS_PER_DAY
    return None


def named_period(text: str, now: datetime) -> tuple[float, float] | None:
    """The span ``text`` names, as epoch seconds ``(start, end)`` (end exclusive), or None.

    A dated span wins over a relative one; relative spans are counted back from ``now``.
    """
    return _dated_span(text) or _relative_span(text, now)


def days_from_period(
    epochs: npt.NDArray[np.float64], period: tuple[float, float]
) -> npt.NDArray[np.float64]:
    """Days from each epoch to the period: 0 inside it, else the days to its nearer edge."""
    start, end = period
    before = np.maximum(0.0, start - epochs)
    after = np.maximum(0.0, epochs - end)
    result: npt.NDArray[np.float64] = (before + after) / SECONDS_PER_DAY
    return result
