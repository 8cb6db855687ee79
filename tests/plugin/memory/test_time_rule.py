"""The time rule a query gets, the ages it gives memories, and the reason each hit prints."""

from datetime import UTC, datetime

import numpy as np
import pytest

from plugin.memory.time_rule import classify_query, rule_ages, rule_reasons, state_reference

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DAY = 86400.0


@pytest.mark.parametrize(
    ("query", "kind", "reason"),
    [
        ("What did Gina do in May 2022?", "period", "names a period"),
        ("Where do I live?", "state", "about the user ('i'), present tense"),
        ("What is Jon currently reading?", "state", "state word 'currently'"),
        ("Where was I living until now?", "state", "state word 'now'"),
        ("When did Jon lose his job?", "event", "past or history cue 'when'"),
        ("Did I ever go to Rome?", "event", "past or history cue 'did'"),
        ("Where does Kenji work?", "event", "third person, no state word"),
        ("Which US state do Audrey and Andrew live in?", "event", "third person, no state word"),
    ],
)
def test_each_query_gets_one_rule_and_the_cue_that_chose_it(
    query: str, kind: str, reason: str
) -> None:
    rule = classify_query(query, NOW)
    assert (rule.kind, rule.reason) == (kind, reason)
    assert rule.uses_lexical == (kind != "state")


def test_a_period_query_ages_memories_by_their_distance_to_the_period() -> None:
    rule = classify_query("What did I do in May 2026?", NOW)
    may = datetime(2026, 5, 10, tzinfo=UTC).timestamp()
    epochs = np.array([may, may - 40 * DAY, datetime(2026, 6, 3, tzinfo=UTC).timestamp()])
    ages = rule_ages(rule, epochs, NOW, None)
    assert ages.tolist() == pytest.approx([0.0, 31.0, 2.0])
    assert rule_reasons(rule, ages, np.zeros(3)) == [
        "0 days from 2026-05-01..2026-06-01, the period the query names",
        "31 days from 2026-05-01..2026-06-01, the period the query names",
        "2 days from 2026-05-01..2026-06-01, the period the query names",
    ]


def test_an_event_query_is_time_neutral() -> None:
    rule = classify_query("When did Jon lose his job?", NOW)
    ages = rule_ages(rule, np.array([0.0, 1e9]), NOW, None)
    assert ages.tolist() == [0.0, 0.0]
    assert set(rule_reasons(rule, ages, np.zeros(2))) == {
        "time-neutral (age 0): past or history cue 'when'"
    }


def test_a_state_query_ages_from_the_users_newest_memory_not_the_clock() -> None:
    rule = classify_query("Where do I live?", NOW)
    newest = NOW.timestamp() - 400 * DAY  # the user has been away for 400 days
    epochs = np.array([newest, newest - 197 * DAY])
    ages = rule_ages(rule, epochs, NOW, newest)
    assert ages.tolist() == pytest.approx([0.0, 197.0])
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert rule_ages(rule, epochs, later, newest).tolist() == ages.tolist()
    reasons = rule_reasons(rule, ages, np.array([0.577, 0.47]))
    assert reasons[1] == (
        "current-state query (about the user ('i'), present tense): similarity = cosine 0.47, "
        "word overlap ignored; 197 days older than the user's newest memory"
    )


def test_the_state_reference_is_never_after_now() -> None:
    future = NOW.timestamp() + 10 * DAY
    assert state_reference(NOW, future) == NOW.timestamp()
    assert state_reference(NOW, None) == NOW.timestamp()
    rule = classify_query("Where do I live?", NOW)
    ages = rule_ages(rule, np.array([future, NOW.timestamp() - DAY]), NOW, future)
    assert ages.tolist() == pytest.approx([0.0, 1.0])
