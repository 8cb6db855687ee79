"""The time cues a query carries: the period it names, and its state, past and person words."""

from datetime import UTC, datetime

import numpy as np
import pytest

from plugin.memory.time_cues import (
    FORMER_CUE,
    PAST_CUE,
    PAST_VERB,
    PERFECT_CUE,
    PERSON_CUE,
    STATE_CUE,
    days_from_period,
    named_period,
)

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


@pytest.mark.parametrize(
    ("query", "state", "past", "person"),
    [
        ("Where do I live now?", "now", None, "i"),
        ("What is Jon currently reading?", "currently", None, None),
        ("When did Jon lose his job?", None, "when", None),
        ("Have you ever been to Rome?", None, "ever", "you"),
        ("Which US state do Audrey and Andrew live in?", None, None, None),
        ("Are they still with us?", "still", None, "us"),
        ("What do I do these  days?", "these  days", None, "i"),
        ("what have i been reading lately", "lately", None, "i"),
        ("Am I no longer with Sam", "no longer", None, "i"),
    ],
)
def test_state_past_and_person_cues(
    query: str, state: str | None, past: str | None, person: str | None
) -> None:
    def found(pattern: object) -> str | None:
        match = pattern.search(query)  # type: ignore[attr-defined]
        return None if match is None else match.group(0).lower()

    assert (found(STATE_CUE), found(PAST_CUE), found(PERSON_CUE)) == (state, past, person)


@pytest.mark.parametrize(
    ("query", "former"),
    [
        ("Where did I live before Berlin?", "before"),
        ("What did I use to do for work?", "did i use to"),
        ("What I used to eat", "used to"),
        ("Who was my boss previously?", "previously"),
        ("What was my job originally?", "originally"),
        ("Tell me about my old flat", "my old"),
        ("Where is my previous car?", "my previous"),
        ("Where do I live?", None),
        ("How old am I?", None),
        ("What is the first thing on my list?", None),
        ("What do I use to clean the oven?", None),
    ],
)
def test_former_state_cues(query: str, former: str | None) -> None:
    match = FORMER_CUE.search(query)
    assert (None if match is None else " ".join(match.group(0).lower().split())) == former


@pytest.mark.parametrize(
    ("query", "verb", "perfect"),
    [
        ("Who taught me chess?", "taught", None),
        ("what happened to the roof", "happened", None),
        ("Where have I moved to?", "moved", "have"),
        ("I've bought a car, which one?", "bought", "'ve"),
        ("What car do I drive?", None, None),
        ("Am I married?", None, None),
    ],
)
def test_past_verbs_and_perfect_auxiliaries(
    query: str, verb: str | None, perfect: str | None
) -> None:
    def found(pattern: object) -> str | None:
        match = pattern.search(query)  # type: ignore[attr-defined]
        return None if match is None else match.group(0).lower()

    assert (found(PAST_VERB), found(PERFECT_CUE)) == (verb, perfect)
