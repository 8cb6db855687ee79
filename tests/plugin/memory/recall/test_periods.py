"""The period a query names, in its lexicon's words, and each memory's distance in days from it."""

import copy
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.recall.lexicon import load_lexicon
from affect_memory.memory.recall.periods import (
    PeriodReader,
    days_from_period,
    named_period,
    period_reader,
)
from affect_memory.memory.recall.plan import default_analyser

NOW = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
DAY = 86400.0


def _days(period: tuple[float, float] | None) -> tuple[str, str] | None:
    if period is None:
        return None
    start, end = (datetime.fromtimestamp(edge, UTC).date().isoformat() for edge in period)
    return start, end


@pytest.mark.parametrize(
    ("query", "span"),
    [
        ("What did Gina find on 1 February, 2023?", ("2023-02-01", "2023-02-02")),
        ("What happened on July 3rd, 2023?", ("2023-07-03", "2023-07-04")),
        ("Where did Joanna travel in July 2022?", ("2022-07-01", "2022-08-01")),
        ("What state did Joanna visit in summer 2021?", ("2021-06-01", "2021-09-01")),
        ("Any snow in winter 2022?", ("2022-12-01", "2023-03-01")),
        ("What did I start in 2022?", ("2022-01-01", "2023-01-01")),
        ("Which day in Sep. 2023?", ("2023-09-01", "2023-10-01")),
    ],
)
def test_a_dated_period_is_its_day_month_season_or_year(
    query: str, span: tuple[str, str]
) -> None:
    assert _days(named_period(query, NOW)) == span


def test_relative_periods_count_back_from_now() -> None:
    assert named_period("What did I eat yesterday?", NOW) == (
        NOW.timestamp() - DAY,
        NOW.timestamp(),
    )
    start, end = named_period("Where was I 3 weeks ago?", NOW) or (0.0, 0.0)
    centre = NOW.timestamp() - 21 * DAY
    assert (start, end) == (centre - 5.25 * DAY, centre + 5.25 * DAY)
    start, end = named_period("What did we do last week?", NOW) or (0.0, 0.0)
    assert (start, end) == (NOW.timestamp() - 14 * DAY, NOW.timestamp() - 7 * DAY)
    assert named_period("what happened a year ago", NOW) is not None


@pytest.mark.parametrize(
    "query",
    ["Where do I live?", "What did I do in May?", "What happened on Monday?", "Who is 2022?"],
)
def test_a_bare_month_weekday_or_number_names_no_period(query: str) -> None:
    assert named_period(query, NOW) is None


def test_an_impossible_date_falls_back_to_its_month() -> None:
    assert _days(named_period("What about 31 February, 2023?", NOW)) == (
        "2023-02-01",
        "2023-03-01",
    )


def test_days_from_a_period_are_zero_inside_it_and_count_to_the_nearer_edge() -> None:
    start, end = 100 * DAY, 110 * DAY
    epochs = np.array([90 * DAY, 100 * DAY, 105 * DAY, 110 * DAY, 113 * DAY])
    assert days_from_period(epochs, (start, end)).tolist() == [10.0, 0.0, 0.0, 0.0, 3.0]


def _english() -> dict[str, Any]:
    return copy.deepcopy(load_lexicon("en")["periods"])


def test_the_date_words_are_the_lexicons_data() -> None:
    words = _english()
    words["units"]["fortnight"] = 14
    words["count_words"]["three"] = 3
    reader = PeriodReader(words, "test periods")
    start, end = reader.span("What did I cook three fortnights ago?", NOW) or (0.0, 0.0)
    centre = NOW.timestamp() - 42 * DAY
    assert (start, end) == (centre - 10.5 * DAY, centre + 10.5 * DAY)
    assert named_period("What did I cook three fortnights ago?", NOW) is None  # not English's
    assert reader.calendar_words >= {"july", "monday"} and "jul" not in reader.calendar_words


def test_the_analyser_reads_periods_in_its_lexicons_words() -> None:
    assert period_reader("en").span("Where was I in July 2022?", NOW) == named_period(
        "Where was I in July 2022?", NOW
    )
    plan = default_analyser().plan("Where was I in July 2022?", "u42", NOW)
    assert plan.kind == "period" and plan.period == named_period("Where was I in July 2022?", NOW)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("units", {"day": "one"}, r"test periods\.units\.day must be a number, got 'one'"),
        ("seasons", {"summer": [6]}, r"test periods\.seasons\.summer must be 2 numbers"),
        ("months", ["january"], "months and month_abbreviations need 12 names each"),
        ("ago", "", r"test periods\.ago must be a non-empty string"),
        ("weekdays", None, r"test periods\.weekdays must be a list of non-empty strings"),
    ],
)
def test_a_malformed_period_lexicon_is_refused_naming_the_field(
    field: str, value: object, message: str
) -> None:
    words = _english()
    words[field] = value
    with pytest.raises(InvalidInputError, match=message):
        PeriodReader(words, "test periods")
