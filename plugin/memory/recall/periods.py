"""The period a query names, and how far each memory lies from it.

Date phrases, no topics, names or dataset phrases, in the words of one language's lexicon (its
``periods``: month, weekday and season names, count words, units, the relative spans):
``named_period(text, now)`` is the span a query names, as epoch seconds ``(start, end)`` with
the end exclusive. Absolute: "3 July, 2023", "July 3, 2023", "July 2023", "summer 2021", "in
2022"; relative to ``now``: "yesterday", "today", "last/this week|month|year" and "N
days/weeks/months/years ago" (give or take a quarter of N). A bare month or weekday without a
year names nothing (it is ambiguous). The words are data and only the phrases' order (day month
year, N units ago) is code, so the names do not change with the process's locale as Python's
``calendar`` names do. The words that say whether a query asks about now or the past are the
query analyser's (``affect_memory.memory.recall.plan``).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.retrieval import SECONDS_PER_DAY
from affect_memory.memory.recall.lexicon import (
    load_lexicon,
    normal_phrase,
    phrase_alternation,
    word_list,
)

__all__ = ["PeriodReader", "days_from_period", "named_period", "period_reader"]

_DIGIT = re.compile(r"\d")


def _words(data: Mapping[str, object], key: str, where: str) -> list[str]:
    return [normal_phrase(item) for item in word_list(data, key, where)]


def _word(data: Mapping[str, object], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{where}.{key} must be a non-empty string, got {shown(value)}")
    return normal_phrase(value)


def _numbers(
    data: Mapping[str, object], key: str, where: str, size: int
) -> dict[str, tuple[float, ...]]:
    """Words each mapped to ``size`` numbers (a bare number when ``size`` is 1)."""
    value = data.get(key)
    if not isinstance(value, dict) or not value:
        raise InvalidInputError(f"{where}.{key} must be a non-empty object, got {shown(value)}")
    found: dict[str, tuple[float, ...]] = {}
    for word, numbers in value.items():
        listed = [numbers] if size == 1 else numbers
        if (
            not isinstance(listed, list)
            or len(listed) != size
            or not all(isinstance(n, int | float) and not isinstance(n, bool) for n in listed)
        ):
            raise InvalidInputError(
                f"{where}.{key}.{word} must be {'a number' if size == 1 else f'{size} numbers'}, "
                f"got {shown(numbers)}"
            )
        found[normal_phrase(str(word))] = tuple(float(n) for n in listed)
    return found


def _midnight(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _month_span(year: int, month: int) -> tuple[float, float]:
    days = calendar.monthrange(year, month)[1]
    return _midnight(year, month, 1), _midnight(year, month, days) + SECONDS_PER_DAY


class PeriodReader:
    """One language's date words, compiled into the phrases that name a period."""

    def __init__(self, words: Mapping[str, object], where: str) -> None:
        """Compile a lexicon's ``periods`` object; a missing or malformed field is refused,
        named as ``where.field``."""
        months = _words(words, "months", where)
        short = _words(words, "month_abbreviations", where)
        if len(months) != 12 or len(short) != 12:
            raise InvalidInputError(f"{where}: months and month_abbreviations need 12 names each")
        self._month_numbers = {name: at % 12 + 1 for at, name in enumerate([*months, *short])}
        self.calendar_words = frozenset([*months, *_words(words, "weekdays", where)])
        """Month and weekday names (lower case): capitalised in a sentence, yet no one's name."""
        self._seasons = {
            name: (int(first), int(last))
            for name, (first, last) in _numbers(words, "seasons", where, 2).items()
        }
        self._counts = {w: int(n) for w, (n,) in _numbers(words, "count_words", where, 1).items()}
        self._unit_days = {w: n for w, (n,) in _numbers(words, "units", where, 1).items()}
        self._relative_spans = {
            phrase: (back, until)
            for phrase, (back, until) in _numbers(words, "relative_spans", where, 2).items()
        }  # days back to each span's start and to its end (negative: the end is tomorrow)
        month = phrase_alternation([*months, *short])
        ordinal = rf"(?:{phrase_alternation(_words(words, 'ordinal_suffixes', where))})?"
        of = rf"(?:{re.escape(_word(words, 'of', where))}\s+)?"
        flags = re.IGNORECASE
        self._day_month_year = re.compile(
            rf"\b(\d{{1,2}}){ordinal}\s+{of}({month})\.?,?\s+(\d{{4}})\b", flags
        )
        self._month_day_year = re.compile(
            rf"\b({month})\.?\s+(\d{{1,2}}){ordinal},?\s+(\d{{4}})\b", flags
        )
        self._month_year = re.compile(rf"\b({month})\.?,?\s+{of}(\d{{4}})\b", flags)
        self._season_year = re.compile(
            rf"\b({phrase_alternation(list(self._seasons))})\s+{of}(\d{{4}})\b", flags
        )
        prepositions = phrase_alternation(_words(words, "year_prepositions", where))
        self._year = re.compile(rf"\b(?:{prepositions})\s+((?:19|20)\d\d)\b", flags)
        plural = re.escape(_word(words, "plural_suffix", where))
        self._ago = re.compile(
            rf"\b(\d+|{phrase_alternation(list(self._counts))})\s+"
            rf"({phrase_alternation(list(self._unit_days))})(?:{plural})?\s+"
            rf"{re.escape(_word(words, 'ago', where))}\b",
            flags,
        )
        spans = phrase_alternation(list(self._relative_spans))
        self._relative = re.compile(rf"\b({spans})\b", flags)

    def span(self, text: str, now: datetime) -> tuple[float, float] | None:
        """The span ``text`` names, as epoch seconds ``(start, end)`` (end exclusive), or None.

        A dated span wins over a relative one; relative spans are counted back from ``now``.
        """
        return self._dated_span(text) or self._relative_span(text, now)

    def _dated_day(self, text: str) -> tuple[float, float] | None:
        for pattern, day_first in ((self._day_month_year, True), (self._month_day_year, False)):
            found = pattern.search(text)
            if found is None:
                continue
            first, second, year = found.groups()
            day, month = (first, second) if day_first else (second, first)
            try:
                start = _midnight(int(year), self._month_numbers[normal_phrase(month)], int(day))
            except ValueError:  # "31 February, 2023" names no day
                continue
            return start, start + SECONDS_PER_DAY
        return None

    def _dated_span(self, text: str) -> tuple[float, float] | None:
        if _DIGIT.search(text) is None:  # every dated span has a year (most questions have none)
            return None
        day = self._dated_day(text)
        if day is not None:
            return day
        found = self._month_year.search(text)
        if found is not None:
            month = self._month_numbers[normal_phrase(found.group(1))]
            return _month_span(int(found.group(2)), month)
        found = self._season_year.search(text)
        if found is not None:
            first, last = self._seasons[normal_phrase(found.group(1))]
            year = int(found.group(2))
            if first > last:  # across the new year ("winter 2022": December to February 2023)
                return _month_span(year, first)[0], _month_span(year + 1, last)[1]
            return _month_span(year, first)[0], _month_span(year, last)[1]
        found = self._year.search(text)
        if found is not None:
            year = int(found.group(1))
            return _midnight(year, 1, 1), _midnight(year + 1, 1, 1)
        return None

    def _relative_span(self, text: str, now: datetime) -> tuple[float, float] | None:
        reference = now.timestamp()
        found = self._ago.search(text)
        if found is not None:
            count_word = found.group(1).lower()
            count = int(count_word) if count_word.isdigit() else self._counts[count_word]
            days = self._unit_days[normal_phrase(found.group(2))] * count
            centre = reference - days * SECONDS_PER_DAY
            half = max(1.0, days * 0.25) * SECONDS_PER_DAY  # "3 weeks ago" is give or take 5 days
            return centre - half, centre + half
        found = self._relative.search(text)
        if found is not None:
            back, until = self._relative_spans[normal_phrase(found.group(1))]
            return reference - back * SECONDS_PER_DAY, reference - until * SECONDS_PER_DAY
        return None


@cache
def period_reader(language: str) -> PeriodReader:
    """The period phrases of ``language``'s lexicon (its ``periods`` object), compiled once."""
    where = f"lexicon {language!r}: periods"
    words = load_lexicon(language).get("periods")
    if not isinstance(words, dict):
        raise InvalidInputError(f"{where} must be an object, got {shown(words)}")
    return PeriodReader(words, where)


def named_period(text: str, now: datetime, language: str = "en") -> tuple[float, float] | None:
    """The span ``text`` names in ``language``'s words (``PeriodReader.span``), or None."""
    return period_reader(language).span(text, now)


def days_from_period(
    epochs: npt.NDArray[np.float64], period: tuple[float, float]
) -> npt.NDArray[np.float64]:
    """Days from each epoch to the period: 0 inside it, else the days to its nearer edge."""
    start, end = period
    before = np.maximum(0.0, start - epochs)
    after = np.maximum(0.0, epochs - end)
    result: npt.NDArray[np.float64] = (before + after) / SECONDS_PER_DAY
    return result
