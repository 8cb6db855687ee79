"""The ages a query's plan gives memories, the state rule's relevance, and each hit's reason."""

from datetime import UTC, datetime

import numpy as np
import pytest

from affect_memory.memory.recall.plan import QueryPlan, default_analyser
from affect_memory.memory.recall.time_rule import (
    ages_by_date,
    rule_ages,
    rule_anchor,
    rule_reasons,
    state_reference,
    state_similarity,
)
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, RecallSettings

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DAY = 86400.0
SETTINGS = DEFAULT_RECALL_SETTINGS
NO_WORDS = RecallSettings(state_lexical_weight=0.0)
"""The state rule without the words-matched part, so each test sees one part at a time."""


def classify_query(query: str, now: datetime) -> QueryPlan:
    return default_analyser().plan(query, "u42", now)


def test_a_period_query_ages_memories_by_their_distance_to_the_period() -> None:
    rule = classify_query("What did I do in May 2026?", NOW)
    may = datetime(2026, 5, 10, tzinfo=UTC).timestamp()
    epochs = np.array([may, may - 40 * DAY, datetime(2026, 6, 3, tzinfo=UTC).timestamp()])
    ages = rule_ages(rule, epochs, NOW, None, SETTINGS)
    assert ages.tolist() == pytest.approx([0.0, 31.0, 2.0])
    assert rule_reasons(rule, ages, np.zeros(3), SETTINGS) == [
        "0 days from 2026-05-01..2026-06-01, the period the query names",
        "31 days from 2026-05-01..2026-06-01, the period the query names",
        "2 days from 2026-05-01..2026-06-01, the period the query names",
    ]


def test_an_event_query_is_time_neutral() -> None:
    rule = classify_query("When did Jon lose his job?", NOW)
    ages = rule_ages(rule, np.array([0.0, 1e9]), NOW, None, SETTINGS)
    assert ages.tolist() == [0.0, 0.0]
    assert set(rule_reasons(rule, ages, np.zeros(2), SETTINGS)) == {
        "time-neutral (age 0): past tense ('did')"
    }


@pytest.mark.parametrize(
    ("query", "kind", "dated"),
    [
        ("When did Jon lose his job?", "event", False),
        ("What did I do in May 2026?", "period", True),
        ("Where does the user work now?", "state", True),
        ("Where did I live before Berlin?", "former", True),
    ],
)
def test_only_the_event_rule_ages_memories_without_their_dates(
    query: str, kind: str, dated: bool
) -> None:
    """What lets ranking bound an event query's members before reading their rows."""
    rule = classify_query(query, NOW)
    assert rule.kind == kind
    assert ages_by_date(rule) is dated
    epochs = np.array([0.0, 1e9, NOW.timestamp() - 30 * DAY])
    ages = rule_ages(rule, epochs, NOW, 5e8, SETTINGS)  # an anchor between the first two
    assert (len(set(ages.tolist())) > 1) is dated
    assert ages_by_date(None)  # the dense ranking's calendar


def test_a_state_query_ages_from_its_anchor_not_the_clock_at_the_settings_scale() -> None:
    rule = classify_query("Where do I live?", NOW)
    newest = NOW.timestamp() - 400 * DAY  # the user has been away for 400 days
    epochs = np.array([newest, newest - 198 * DAY])
    ages = rule_ages(rule, epochs, NOW, newest, SETTINGS)
    assert ages.tolist() == pytest.approx([0.0, 99.0])
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert rule_ages(rule, epochs, later, newest, SETTINGS).tolist() == ages.tolist()
    quarter = RecallSettings(state_age_scale=0.25)
    assert rule_ages(rule, epochs, NOW, newest, quarter).tolist() == pytest.approx([0.0, 49.5])
    reasons = rule_reasons(rule, ages, np.array([0.577, 0.47]), NO_WORDS)
    assert reasons[1] == (
        "current-state query (about the user, no past cue): similarity = cosine 0.47; 198 days "
        "older than the newest of the query's 3 closest memories, aged at 0.5"
    )


def test_a_state_query_gives_a_memory_that_reports_a_change_a_gain_at_most_one() -> None:
    cosines = np.array([0.5, 0.5, 0.9, -0.2, 0.3])
    changes = np.array([False, True, True, True, False])
    similarity = state_similarity(cosines, changes, NO_WORDS)
    assert similarity.tolist() == pytest.approx([0.5, 0.6, 1.0, 0.0, 0.3])
    doubled = state_similarity(
        cosines, changes, RecallSettings(state_lexical_weight=0.0, change_gain=0.4)
    )
    assert doubled.tolist() == pytest.approx([0.5, 0.7, 1.0, 0.0, 0.3])
    rule = classify_query("What do I drink?", NOW)
    ages = np.array([0.0, 20.0])
    reasons = rule_reasons(rule, ages, cosines[:2], NO_WORDS, changes=[None, "switched"])
    assert reasons[0] == rule_reasons(rule, ages, cosines[:2], NO_WORDS)[0]
    assert reasons[1] == (
        "current-state query (about the user, no past cue): similarity = cosine 0.50, x 1.2 "
        "(reports a change: 'switched'); 40 days older than the newest of the query's 3 "
        "closest memories, aged at 0.5"
    )


def test_a_state_query_weighs_the_words_matched_against_the_cosine() -> None:
    cosines = np.array([0.5, 0.2, 0.9])
    shares = np.array([0.0, 1.0, 0.5])
    changes = np.zeros(3, dtype=bool)
    weighed = state_similarity(cosines, changes, SETTINGS, shares=shares)
    assert SETTINGS.state_lexical_weight == pytest.approx(0.2)
    assert weighed.tolist() == pytest.approx([0.4, 0.36, 0.82])
    assert state_similarity(cosines, changes, SETTINGS).tolist() == pytest.approx(
        (0.8 * cosines).tolist()
    )
    rule = classify_query("What page am I on?", NOW)
    reasons = rule_reasons(rule, np.zeros(3), cosines, SETTINGS, shares=shares)
    assert reasons[1].startswith(
        "current-state query (about the user, no past cue): similarity = 0.8 x cosine 0.20 + "
        "0.2 x words matched 1.00; 0 days older"
    )


def test_a_state_query_adds_the_topic_agreement_before_the_gain_and_caps_at_one() -> None:
    cosines = np.array([0.2, 0.2, 0.5, -0.3, 0.9])
    changes = np.array([False, True, True, False, True])
    topics = np.array([0.0, 1.0, 0.5, 1.0, 0.8])
    similarity = state_similarity(cosines, changes, NO_WORDS, topics)
    # (clip(cos, 0, 1) + 0.3 t) x 1.2 where a change is reported, at most 1
    assert similarity.tolist() == pytest.approx([0.2, 0.6, 0.78, 0.3, 1.0])
    assert state_similarity(cosines, changes, NO_WORDS, np.zeros(5)).tolist() == pytest.approx(
        state_similarity(cosines, changes, NO_WORDS).tolist()
    )
    off = state_similarity(
        cosines, changes, RecallSettings(state_lexical_weight=0.0, topic_weight=0.0), topics
    )
    assert off.tolist() == pytest.approx(state_similarity(cosines, changes, NO_WORDS).tolist())
    rule = classify_query("What do I do for a living?", NOW)
    ages = np.array([0.0, 10.0])
    reasons = rule_reasons(
        rule, ages, cosines[:2], NO_WORDS, changes=[None, "opened"], topics=(topics[:2], "work")
    )
    assert reasons[1] == (
        "current-state query (about the user, no past cue): similarity = cosine 0.20 + 0.3 x "
        "topic agreement 1.00 on 'work', x 1.2 (reports a change: 'opened'); 20 days older "
        "than the newest of the query's 3 closest memories, aged at 0.5"
    )
    closest = np.array([0.2, 0.64])
    reasons = rule_reasons(
        rule, ages, cosines[:2], NO_WORDS, topics=(topics[:2], "work"), closest=closest
    )
    assert reasons[1].startswith(
        "current-state query (about the user, no past cue): similarity = (0.85 x cosine 0.20 + "
        "0.15 x 0.64 with the closest memory) + 0.3 x topic agreement 1.00 on 'work'; 20 days "
        "older"
    )


def test_the_state_anchor_is_the_newest_of_the_most_relevant_members() -> None:
    rule = classify_query("Where do I live?", NOW)
    base = NOW.timestamp()
    # five relevant members (newest 30 days old), then chatter from yesterday, less relevant
    epochs = base - DAY * np.array([400.0, 30.0, 90.0, 200.0, 300.0, 1.0, np.nan])
    relevance = np.array([0.9, 0.6, 0.5, 0.45, 0.4, 0.2, 0.95])
    anchor = rule_anchor(rule, epochs, relevance, base - DAY, SETTINGS)
    assert anchor == pytest.approx(base - 30 * DAY)
    ages = rule_ages(rule, epochs, NOW, anchor, SETTINGS)
    assert ages[:6].tolist() == pytest.approx([185.0, 0.0, 30.0, 85.0, 135.0, 0.0])
    assert np.isnan(ages[6])  # no timestamp: the kernel's fallback recency


def test_a_former_state_query_ages_what_is_newer_than_its_oldest_close_memory() -> None:
    rule = classify_query("Where did I live before Berlin?", NOW)
    base = NOW.timestamp()
    epochs = base - DAY * np.array([10.0, 400.0, 100.0, 5.0])
    relevance = np.array([0.9, 0.7, 0.1, 0.8])
    anchor = rule_anchor(rule, epochs, relevance, base, SETTINGS)
    assert anchor == pytest.approx(base - 400 * DAY)
    ages = rule_ages(rule, epochs, NOW, anchor, SETTINGS)
    assert ages.tolist() == pytest.approx([195.0, 0.0, 150.0, 197.5])
    assert rule_reasons(rule, ages, np.zeros(4), SETTINGS)[0] == (
        "former-state query (earlier state ('before')): 390 days newer than the oldest of the "
        "query's 3 closest memories, aged at 0.5"
    )
    assert rule_ages(rule, epochs, NOW, None, SETTINGS).tolist() == [0.0] * 4


def test_other_rules_keep_the_anchor_they_are_given() -> None:
    epochs, relevance = np.array([0.0, 1e9]), np.array([1.0, 0.0])
    for query in ("When did Jon lose his job?", "What did I do in May 2026?"):
        assert rule_anchor(classify_query(query, NOW), epochs, relevance, 5.0, SETTINGS) == 5.0
    state = classify_query("Where do I live?", NOW)
    assert rule_anchor(state, np.array([np.nan]), np.array([1.0]), 5.0, SETTINGS) == 5.0


def test_the_state_reference_is_never_after_now() -> None:
    future = NOW.timestamp() + 10 * DAY
    assert state_reference(NOW, future) == NOW.timestamp()
    assert state_reference(NOW, None) == NOW.timestamp()
    rule = classify_query("Where do I live?", NOW)
    ages = rule_ages(rule, np.array([future, NOW.timestamp() - DAY]), NOW, future, SETTINGS)
    assert ages.tolist() == pytest.approx([0.0, 0.5])
