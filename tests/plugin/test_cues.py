"""When a message asks for memory: questions, references to the past, retrieval intents."""

from __future__ import annotations

import pytest

from affect_memory.cues import DEFAULT_RETRIEVAL_RULE


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("what time is it", True),
        ("How's your week going", True),
        ("can you help me with something", True),
        ("Do you like jazz", True),
        ("Is it raining there", True),
        ("tell me about the Roman empire", True),
        ("I wonder why stars twinkle", True),
        ("ok?", True),
        ("Can't talk, busy", False),
        ("Will do", False),
        ("Have a nice day", False),
        ("When I was a kid I loved trains", False),
        ("I had pasta for dinner", False),
    ],
)
def test_questions_are_recognised_without_opener_false_positives(text: str, question: bool) -> None:
    assert DEFAULT_RETRIEVAL_RULE.is_question(text) is question


@pytest.mark.parametrize(
    ("text", "past"),
    [
        ("remember my sister's wedding", True),
        ("Last time we spoke I was job hunting", True),
        ("you said the film was good", True),
        ("did I tell you about my new flat", True),
        ("like I said, it's fine", True),
        ("the thing with my landlord happened again", True),
        ("we talked about this yesterday", True),
        ("I moved here three years ago", True),
        ("Good morning", False),
        ("forget it", False),
        ("I'm making tacos tonight", False),
    ],
)
def test_references_to_the_past_are_recognised(text: str, past: bool) -> None:
    assert DEFAULT_RETRIEVAL_RULE.refers_to_past(text) is past


def test_retrieval_intents_need_the_retrieve_threshold() -> None:
    rule = DEFAULT_RETRIEVAL_RULE
    assert rule.decide("I feel so alone", "VULNERABILITY", 0.9, 0.5)
    assert not rule.decide("I feel so alone", "VULNERABILITY", 0.4, 0.5)
    assert rule.decide("tides fascinate me", "CURIOSITY", 0.5, 0.5)
    assert not rule.decide("you absolute moron", "ABUSE", 1.0, 0.5)
