"""What a query says about time: a period it names, and whether it asks about now or the past.

Generic English cues, no topics, names or dataset phrases:

* ``named_period(text, now)``: the span a query names, as epoch seconds ``(start, end)`` with
  the end exclusive. Absolute: "3 July, 2023", "July 3, 2023", "July 2023", "summer 2021",
  "in 2022"; relative to ``now``: "yesterday", "today", "last/this week|month|year" and
  "N days/weeks/months/years ago" (give or take a quarter of N). A bare month or weekday
  without a year names nothing (it is ambiguous).
* ``STATE_CUE``: an explicit present-state word (now, currently, still, these days, lately,
  no longer, ...).
* ``FORMER_CUE``: a pointer to an earlier state (before, used to, previously, originally,
  "my old / previous / former / first ..."); with a person cue the query asks what the user's
  state was, and the superseded fact answers it.
* ``PAST_CUE``: a past auxiliary or a question about the history of events (did, was, ago,
  used to, when, how many times, how often, how long, ever, ...).
* ``PAST_VERB``: a common verb in the simple past (went, saw, taught, bought, happened, ...):
  "Who taught me chess?" asks about an event even with a person cue and no auxiliary, unless
  a perfect auxiliary (``PERFECT_CUE``: have, has, 've) makes it a present state ("Where
  have I moved to?").
* ``PERSON_CUE``: a first- or second-person word (I, my, we, our, you, ...): the question is
  about the user. Capitalised "US" is the country, not "us".
* ``TENSE_NEUTRAL``: the cues above that say nothing of tense by themselves ("before", "when",
  "how often", "how long"): in a present-tense question about the user with no past marker
  (``PRESENT_AUX`` and no ``PAST_AUX``: "What do I drink before work?", "How often do I go
  to the gym?", "When is my wedding?") they ask about the present, not the past.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from kernel.retrieval import SECONDS_PER_DAY

__all__ = [
    "FORMER_CUE",
    "PAST_AUX",
    "PAST_CUE",
    "PAST_VERB",
    "PERFECT_CUE",
    "PERSON_CUE",
    "PRESENT_AUX",
    "STATE_CUE",
    "TENSE_NEUTRAL",
    "days_from_period",
    "named_period",
]

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
_RELATIVE = re.compile(
    r"\b(yesterday|today|last\s+(?:week|month|year)|this\s+(?:week|month|year))\b", re.IGNORECASE
)

STATE_CUE = re.compile(
    r"\b(now|currently|current|these\s+days|nowadays|at\s+the\s+moment|right\s+now|still"
    r"|anymore|any\s+more|no\s+longer|any\s+longer|at\s+present|presently|lately)\b",
    re.IGNORECASE,
)
"""Explicit present-state words; they win over a past cue ("Where was I living until now?")."""

FORMER_CUE = re.compile(
    r"\b(before|used\s+to|did\s+(?:i|you|we)\s+use\s+to|previously|formerly|originally"
    r"|at\s+first|in\s+the\s+past|back\s+then"
    r"|(?:my|our|your)\s+(?:old|ex|former|previous|first|original))\b",
    re.IGNORECASE,
)
"""Pointers to an earlier state of things: what was true before the latest update."""

PAST_CUE = re.compile(
    r"\b(did|was|were|had|ago|used\s+to|previously|formerly|originally|back\s+then|at\s+first"
    r"|first\s+time|before|when|how\s+many\s+times|how\s+often|how\s+long|ever|last\s+time)\b",
    re.IGNORECASE,
)
"""Past auxiliaries, pointers to an earlier time, and questions about when, how often or how
long events happened: history answers them, not the latest state."""

PAST_VERB = re.compile(
    r"\b(went|saw|took|gave|came|wrote|ate|drank|drove|flew|ran|sang|swam|began|knew|grew"
    r"|threw|spoke|broke|chose|forgot|taught|bought|brought|caught|thought|met|told|sold|won"
    r"|lost|paid|spent|sent|built|heard|happened|visited|started|finished|moved|learned"
    r"|learnt|decided|tried|asked|adopted|celebrated|attended|graduated)\b",
    re.IGNORECASE,
)
"""Common simple-past verbs: with no perfect auxiliary, the question is about an event."""

PERFECT_CUE = re.compile(r"\b(have|has)\b|'ve\b", re.IGNORECASE)
"""Perfect auxiliaries: "have moved" is a present state, not a past event."""

PRESENT_AUX = re.compile(r"\b(do|does|am|is|are)\b|'(?:s|re|m)\b", re.IGNORECASE)
"""Present-tense auxiliaries and copulas ("do I", "is my", "what's", "I'm")."""

PAST_AUX = re.compile(r"\b(did|was|were|had|used\s+to)\b", re.IGNORECASE)
"""Past auxiliaries and copulas: with one, a question is about the past whatever else it says."""

TENSE_NEUTRAL = frozenset({"before", "when", "how often", "how long"})
"""Past and former cues that carry no tense: present tense makes them ask about the present."""

PERSON_CUE = re.compile(
    r"\b(?:(?i:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|you|you're"
    r"|you've|your|yours)|us|Us)\b"
)
"""First- and second-person words: the question is about the user (capital "US" is a country)."""


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
