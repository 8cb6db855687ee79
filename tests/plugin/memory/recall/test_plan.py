"""The query analyser: one plan per question however the user is named, and cues that count
with or without a pronoun."""

import json
from datetime import UTC, datetime
from importlib import resources

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.recall.plan import (
    OWNERS_KEPT,
    LexiconAnalyser,
    default_analyser,
    form_weights,
    owner_name,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _plan(query: str, user_id: str = "u42") -> tuple[str, str]:
    plan = default_analyser().plan(query, user_id, NOW)
    return plan.kind, plan.reason


@pytest.mark.parametrize(
    ("query", "kind", "reason"),
    [
        ("What did Gina do in May 2022?", "period", "names a period"),
        ("Where do I live?", "state", "about the user, no past cue"),
        ("What is Jon currently reading?", "state", "state word 'currently'"),
        ("Where was I living until now?", "state", "state word 'now'"),
        ("When did Jon lose his job?", "event", "past tense ('did')"),
        ("Did I ever go to Rome?", "event", "past tense ('did')"),
        ("Where does Kenji work?", "event", "about someone else, no state word"),
        (
            "Which US state do Audrey and Andrew live in?",
            "event",
            "about someone else, no state word",
        ),
        ("Where did I live before Leeds?", "former", "earlier state ('before')"),
        ("where did i use to work", "former", "earlier state ('use to')"),
        ("What was my first car?", "former", "earlier state ('my first')"),
        ("What is the user's previous job?", "former", 'earlier state ("the user\'s previous")'),
        ("What did Jon do before the race?", "event", "past tense ('did')"),
        ("what phone am i using", "state", "about the user, no past cue"),
        ("Remind me where I work", "state", "about the user, no past cue"),
        ("Am I no longer vegetarian?", "state", "state word 'no longer'"),
        ("Who taught me chess?", "event", "past tense ('taught')"),
        ("Where have I moved to?", "state", "about the user, no past cue"),
        ("Am I married?", "state", "about the user, no past cue"),
        ("What has Jon been doing lately?", "state", "state word 'lately'"),
        # tenseless cues in a present question ask about the present
        ("What do I drink before work?", "state", "about the user, no past cue"),
        ("What do I use to clean the oven?", "state", "about the user, no past cue"),
        ("How often do I go to the gym?", "state", "about the user, no past cue"),
        ("When is my wedding?", "state", "about the user, no past cue"),
        ("When did I move to Leeds?", "event", "past tense ('did')"),
        ("How long have I been vegan?", "event", "history cue 'how long'"),
        ("How often does Jon run?", "event", "about someone else, no state word"),
        ("How often do I still run?", "state", "state word 'still'"),
        # a past cue counts without any pronoun: a regular past verb, no present auxiliary
        (
            "How many months passed between the completion of the degree and the new job?",
            "event",
            "past tense ('passed')",
        ),
        ("smoking cigarettes", "state", "about no one in particular, no past cue"),
        ("user dog breed", "state", "about the user, no past cue"),
        ("internet speed", "state", "about no one in particular, no past cue"),
        ("smoking quit ago", "event", "history cue 'ago'"),
    ],
)
def test_each_query_gets_one_plan_and_the_cue_that_chose_it(
    query: str, kind: str, reason: str
) -> None:
    assert _plan(query) == (kind, reason)


@pytest.mark.parametrize(
    "phrasings",
    [
        (
            "Where do I work now?",
            "Where does the user work now?",
            "Where does Alice work now?",
            "user work now",
            "alice work now",
        ),
        (
            "What car do I drive?",
            "What car does the user drive?",
            "What car does Alice drive?",
            "user car",
            "alice car",
        ),
        (
            "Where did I live before Leeds?",
            "Where did the user live before Leeds?",
            "Where did Alice live before Leeds?",
        ),
        ("Who taught me chess?", "Who taught the user chess?", "Who taught Alice chess?"),
        ("What was my first car?", "What was the user's first car?", "What was Alice's first car?"),
    ],
)
def test_the_same_question_gets_the_same_plan_however_the_user_is_named(
    phrasings: tuple[str, ...],
) -> None:
    plans = [default_analyser().plan(query, "alice", NOW) for query in phrasings]
    assert {(plan.kind, plan.subject) for plan in plans} == {(plans[0].kind, "user")}


def test_the_owner_is_written_every_way_for_the_embedding_and_cut_for_the_words() -> None:
    plan = default_analyser().plan("Where does Alice's sister live?", "alice", NOW)
    assert plan.embed_texts == (
        "Where does my sister live?",
        "Where does the user's sister live?",
        "Where does Alice's sister live?",
    )
    assert plan.match_text == "Where does sister live?"
    plain = default_analyser().plan("Where does the user live now?", "945e3d21", NOW)
    assert plain.embed_texts == ("Where does I live now?", "Where does the user live now?")
    assert default_analyser().plan("bees", "alice", NOW).embed_texts == ("bees",)


def test_a_name_is_the_owner_s_as_a_name_is_written_and_a_month_is_nobody_s() -> None:
    analyser = default_analyser()
    test = analyser.plan("Which test did Bob pass?", "test", NOW)
    assert (test.subject, test.match_text) == ("other", "Which test did Bob pass?")
    may = analyser.plan("What did I do in May 2025?", "may", NOW)
    assert may.embed_texts == ("What did I do in May 2025?", "What did the user do in May 2025?")
    assert analyser.plan("alice job", "alice", NOW).match_text == "job"  # keywords: any case
    assert analyser.plan("Where did Alice's job go?", "alice", NOW).subject == "user"


def test_capital_us_is_a_country_and_a_name_is_only_the_owner_s_when_the_id_spells_it() -> None:
    assert default_analyser().plan("Which US state is it?", "bob", NOW).subject == "none"
    assert default_analyser().plan("Are they still with us?", "bob", NOW).subject == "user"
    assert default_analyser().plan("Where does Bob live?", "bob", NOW).subject == "user"
    assert default_analyser().plan("Where does Bob live?", "ann", NOW).subject == "other"
    assert default_analyser().plan("What did I do in May?", "bob", NOW).subject == "user"
    assert (owner_name("mary_jones"), owner_name("u42"), owner_name("945e3d21")) == (
        "Mary Jones",
        None,
        None,
    )


def test_the_plan_is_json_with_its_cues_and_period() -> None:
    plan = default_analyser().plan("What did I do last week?", "u42", NOW)
    assert plan.to_json() == {
        "kind": "period",
        "reason": "names a period",
        "subject": "user",
        "tense": "past",
        "cues": ["period", "did"],
        "period": ["2026-05-18T12:00:00+00:00", "2026-05-25T12:00:00+00:00"],
    }


def test_the_lexicon_is_data_and_an_unknown_language_is_refused() -> None:
    lexicon = json.loads(
        resources.files("affect_memory.memory.recall.lexicon").joinpath("en.json").read_text()
    )
    assert "now" in lexicon["state_words"] and "did" in lexicon["past_auxiliaries"]
    with pytest.raises(InvalidInputError, match="no recall lexicon for language 'xx'"):
        LexiconAnalyser("xx")


def test_each_way_of_writing_the_owner_weighs_its_share_of_the_memories() -> None:
    terms = default_analyser().form_terms("amara")
    assert terms == {"third": ["user"], "name": ["amara"]}
    forms = ("first", "third", "name")
    # 10 memories: 3 hold "user", 5 hold "amara", the other 2 are first person
    assert form_weights(forms, terms, 10, {"user": 3, "amara": 5}) == pytest.approx([0.2, 0.3, 0.5])
    assert form_weights(forms, terms, 0, {}) == [1.0, 1.0, 1.0]  # no memories: alike
    assert form_weights(("query",), terms, 10, {"user": 3}) == [1.0]


def test_a_user_planned_again_after_many_others_gets_the_same_plan() -> None:
    """The owner patterns and form terms an analyser keeps are a bounded cache: planning for
    more users than it keeps changes no plan, whether a user's were kept or rebuilt."""
    analyser = LexiconAnalyser()
    questions = ("Where does Maya Lopez work now?", "where do I work now", "maya lopez job")
    first = [analyser.plan(q, "maya_lopez", NOW) for q in questions]
    terms = analyser.form_terms("maya_lopez")
    terms["name"].append("changed by a caller")  # a copy: what the analyser keeps stays
    for n in range(OWNERS_KEPT + 5):
        analyser.plan("Where does the user live?", f"user-{n}", NOW)
        analyser.form_terms(f"user-{n}")
    assert [analyser.plan(q, "maya_lopez", NOW) for q in questions] == first
    assert analyser.form_terms("maya_lopez") == LexiconAnalyser().form_terms("maya_lopez")
    assert "changed by a caller" not in analyser.form_terms("maya_lopez")["name"]
    assert first == [LexiconAnalyser().plan(q, "maya_lopez", NOW) for q in questions]
    assert first[0].subject == "user"
