"""The time rule a query gets, the ages it gives memories, and the reason each hit prints."""

from datetime import UTC, datetime

import numpy as np
import pytest

from plugin.memory.time_rule import (
    ANCHOR_MEMBERS,
    CHANGE_GAIN,
    STATE_AGE_SCALE,
    TOPIC_WEIGHT,
    classify_query,
    rule_ages,
    rule_anchor,
    rule_reasons,
    state_reference,
    state_similarity,
)

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
        ("Where did I live before Leeds?", "former", "earlier state of the user ('before')"),
        ("where did i use to work", "former", "earlier state of the user ('did i use to')"),
        ("What was my first car?", "former", "earlier state of the user ('my first')"),
        ("What did Jon do before the race?", "event", "past or history cue 'did'"),
        ("what phone am i using", "state", "about the user ('i'), present tense"),
        ("Remind me where I work", "state", "about the user ('me'), present tense"),
        ("Am I no longer vegetarian?", "state", "state word 'no longer'"),
        ("Who taught me chess?", "event", "past-tense verb 'taught'"),
        ("Where have I moved to?", "state", "about the user ('i'), present tense"),
        ("Am I married?", "state", "about the user ('i'), present tense"),
        ("What has Jon been doing lately?", "state", "state word 'lately'"),
        # tenseless cues in a present question about the user ask about the present
        ("What do I drink before work?", "state", "about the user ('i'), present tense"),
        ("What's my routine before bed?", "state", "about the user ('my'), present tense"),
        ("How often do I go to the gym?", "state", "about the user ('i'), present tense"),
        ("How long is my commute?", "state", "about the user ('my'), present tense"),
        ("When is my wedding?", "state", "about the user ('my'), present tense"),
        ("When did I move to Leeds?", "event", "past or history cue 'when'"),
        ("How long have I been vegan?", "event", "past or history cue 'how long'"),
        ("What did I do before?", "former", "earlier state of the user ('before')"),
        ("How often does Jon run?", "event", "past or history cue 'how often'"),
        ("How often do I still run?", "state", "state word 'still'"),
    ],
)
def test_each_query_gets_one_rule_and_the_cue_that_chose_it(
    query: str, kind: str, reason: str
) -> None:
    rule = classify_query(query, NOW)
    assert (rule.kind, rule.reason) == (kind, reason)
    assert rule.uses_lexical == (kind != "state")
    assert pytest.approx(0.5) == STATE_AGE_SCALE
    assert ANCHOR_MEMBERS == 3


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


def test_a_state_query_ages_from_its_anchor_not_the_clock_at_half_the_days() -> None:
    rule = classify_query("Where do I live?", NOW)
    newest = NOW.timestamp() - 400 * DAY  # the user has been away for 400 days
    epochs = np.array([newest, newest - 198 * DAY])
    ages = rule_ages(rule, epochs, NOW, newest)
    assert ages.tolist() == pytest.approx([0.0, 99.0])
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert rule_ages(rule, epochs, later, newest).tolist() == ages.tolist()
    reasons = rule_reasons(rule, ages, np.array([0.577, 0.47]))
    assert reasons[1] == (
        "current-state query (about the user ('i'), present tense): similarity = cosine 0.47, "
        "word overlap ignored; 198 days older than the newest of the query's 3 closest "
        "memories, aged at 0.5"
    )


def test_a_state_query_gives_a_memory_that_reports_a_change_a_gain_at_most_one() -> None:
    cosines = np.array([0.5, 0.5, 0.9, -0.2, 0.3])
    changes = np.array([False, True, True, True, False])
    similarity = state_similarity(cosines, changes)
    assert pytest.approx(0.2) == CHANGE_GAIN
    assert similarity.tolist() == pytest.approx([0.5, 0.6, 1.0, 0.0, 0.3])
    rule = classify_query("What do I drink?", NOW)
    ages = np.array([0.0, 20.0])
    reasons = rule_reasons(rule, ages, cosines[:2], [None, "switched"])
    assert reasons[0] == rule_reasons(rule, ages, cosines[:2])[0]
    assert reasons[1] == (
        "current-state query (about the user ('i'), present tense): similarity = cosine 0.50 "
        "x 1.2 (reports a change: 'switched'), word overlap ignored; 40 days older than the "
        "newest of the query's 3 closest memories, aged at 0.5"
    )


def test_a_state_query_adds_the_topic_agreement_before_the_gain_and_caps_at_one() -> None:
    cosines = np.array([0.2, 0.2, 0.5, -0.3, 0.9])
    changes = np.array([False, True, True, False, True])
    topics = np.array([0.0, 1.0, 0.5, 1.0, 0.8])
    similarity = state_similarity(cosines, changes, topics)
    assert pytest.approx(0.3) == TOPIC_WEIGHT
    # (clip(cos, 0, 1) + 0.3 t) x 1.2 where a change is reported, at most 1
    assert similarity.tolist() == pytest.approx([0.2, 0.6, 0.78, 0.3, 1.0])
    assert state_similarity(cosines, changes, np.zeros(5)).tolist() == pytest.approx(
        state_similarity(cosines, changes).tolist()
    )
    rule = classify_query("What do I do for a living?", NOW)
    ages = np.array([0.0, 10.0])
    reasons = rule_reasons(rule, ages, cosines[:2], [None, "opened"], (topics[:2], "work"))
    assert reasons[1] == (
        "current-state query (about the user ('i'), present tense): similarity = (cosine 0.20 "
        "+ 0.3 x topic agreement 1.00 on 'work') x 1.2 (reports a change: 'opened'), word "
        "overlap ignored; 20 days older than the newest of the query's 3 closest memories, "
        "aged at 0.5"
    )
    closest = np.array([0.2, 0.64])
    reasons = rule_reasons(rule, ages, cosines[:2], [None, None], (topics[:2], "work"), closest)
    assert reasons[1].startswith(
        "current-state query (about the user ('i'), present tense): similarity = (0.85 x cosine "
        "0.20 + 0.15 x 0.64 with the closest memory + 0.3 x topic agreement 1.00 on 'work'), "
        "word overlap ignored; 20 days older"
    )


def test_the_state_anchor_is_the_newest_of_the_most_relevant_members() -> None:
    rule = classify_query("Where do I live?", NOW)
    base = NOW.timestamp()
    # five relevant members (newest 30 days old), then chatter from yesterday, less relevant
    epochs = base - DAY * np.array([400.0, 30.0, 90.0, 200.0, 300.0, 1.0, np.nan])
    relevance = np.array([0.9, 0.6, 0.5, 0.45, 0.4, 0.2, 0.95])
    anchor = rule_anchor(rule, epochs, relevance, base - DAY)
    assert anchor == pytest.approx(base - 30 * DAY)
    ages = rule_ages(rule, epochs, NOW, anchor)
    assert ages[:6].tolist() == pytest.approx([185.0, 0.0, 30.0, 85.0, 135.0, 0.0])
    assert np.isnan(ages[6])  # no timestamp: the kernel's fallback recency


def test_a_former_state_query_ages_what_is_newer_than_its_oldest_close_memory() -> None:
    rule = classify_query("Where did I live before Berlin?", NOW)
    assert rule.uses_lexical
    base = NOW.timestamp()
    epochs = base - DAY * np.array([10.0, 400.0, 100.0, 5.0])
    relevance = np.array([0.9, 0.7, 0.1, 0.8])
    anchor = rule_anchor(rule, epochs, relevance, base)
    assert anchor == pytest.approx(base - 400 * DAY)
    ages = rule_ages(rule, epochs, NOW, anchor)
    assert ages.tolist() == pytest.approx([195.0, 0.0, 150.0, 197.5])
    assert rule_reasons(rule, ages, np.zeros(4))[0] == (
        "former-state query (earlier state of the user ('before')): 390 days newer than the "
        "oldest of the query's 3 closest memories, aged at 0.5"
    )
    assert rule_ages(rule, epochs, NOW, None).tolist() == [0.0] * 4


def test_other_rules_keep_the_anchor_they_are_given() -> None:
    epochs, relevance = np.array([0.0, 1e9]), np.array([1.0, 0.0])
    for query in ("When did Jon lose his job?", "What did I do in May 2026?"):
        assert rule_anchor(classify_query(query, NOW), epochs, relevance, 5.0) == 5.0
    state = classify_query("Where do I live?", NOW)
    assert rule_anchor(state, np.array([np.nan]), np.array([1.0]), 5.0) == 5.0


def test_the_state_reference_is_never_after_now() -> None:
    future = NOW.timestamp() + 10 * DAY
    assert state_reference(NOW, future) == NOW.timestamp()
    assert state_reference(NOW, None) == NOW.timestamp()
    rule = classify_query("Where do I live?", NOW)
    ages = rule_ages(rule, np.array([future, NOW.timestamp() - DAY]), NOW, future)
    assert ages.tolist() == pytest.approx([0.0, 0.5])
