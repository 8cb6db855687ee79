"""Presence surfacing: text cleaning, the presence line and the presence vector."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affect_memory.kernel import (
    AffectState,
    CognitionState,
    PresenceLabels,
    build_presence_vector,
    clean_text,
    presence_line,
)
from tests.kernel.strategies import PROPERTY, affect_states, short_text

VECTOR_KEYS = {
    "trust",
    "valence",
    "arousal",
    "longing",
    "awaiting",
    "mode",
    "line",
    "affect",
    "relationship",
    "cognition",
    "source",
}


@given(short_text(), st.integers(-5, 60))
@PROPERTY
def test_clean_text_is_none_or_a_single_spaced_nonempty_string(text: str, max_len: int) -> None:
    cleaned = clean_text(text, max_len)
    if cleaned is None:
        return
    assert cleaned
    assert cleaned == cleaned.strip()
    assert "  " not in cleaned
    assert cleaned.split() == cleaned.split(" ")


@given(short_text(), st.integers(1, 60))
@PROPERTY
def test_clean_text_never_exceeds_max_len_even_with_the_ellipsis(text: str, max_len: int) -> None:
    # The ellipsis follows a cut made at a space inside the window, so it takes that space's room.
    cleaned = clean_text(text, max_len)
    assert cleaned is None or len(cleaned) <= max_len


@given(short_text())
@PROPERTY
def test_clean_text_without_a_limit_only_normalizes(text: str) -> None:
    cleaned = clean_text(text, 0)
    expected = " ".join(text.strip().strip('"').split()) or None
    assert cleaned == expected
    assert clean_text(text, -3) == cleaned


@given(st.text(alphabet=string.ascii_letters + " \t\n\u3000.,!?", max_size=80))
@PROPERTY
def test_clean_text_is_idempotent_for_unquoted_text(text: str) -> None:
    once = clean_text(text, 0)
    assert clean_text(once, 0) == once


@given(st.text(alphabet=string.ascii_letters + " .,!?;:-", max_size=80), st.integers(1, 40))
@PROPERTY
def test_clean_text_truncation_keeps_a_prefix_of_the_cleaned_text(text: str, max_len: int) -> None:
    full = clean_text(text, 0)
    cut = clean_text(text, max_len)
    if full is None:
        assert cut is None
        return
    assert cut is not None
    body = cut.removesuffix("…")
    assert full.startswith(body)
    if len(full) <= max_len:
        assert cut == full


@given(
    st.one_of(
        st.none(), st.integers(), st.floats(), st.booleans(), st.binary(), st.lists(st.text())
    )
)
@PROPERTY
def test_clean_text_gives_none_for_anything_but_a_string(value: object) -> None:
    assert clean_text(value, 300) is None


@pytest.mark.parametrize(
    "text, max_len, expected",
    [
        ("One. Two three four", 12, "One. Two…"),
        ("Done! and then more", 8, "Done!"),
        ("Done! and then more", 10, "Done! and…"),
        ("no-spaces-at-all-here", 7, "no-spac"),
        ("word; next", 7, "word…"),
    ],
)
def test_clean_text_cut_rules(text: str, max_len: int, expected: str) -> None:
    assert clean_text(text, max_len) == expected


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans())
@PROPERTY
def test_presence_line_follows_the_fixed_priority(
    reflecting: bool, due: bool, carrying: bool, thread: bool
) -> None:
    ladder = [
        (reflecting, "still reflecting"),
        (due, "holding a follow-up"),
        (carrying, "carrying a thread"),
        (thread, "holding a pattern"),
        (True, "here with you"),
    ]
    expected = next(label for holds, label in ladder if holds)
    assert presence_line(reflecting, due, carrying, thread) == expected


def test_presence_labels_are_replaceable() -> None:
    labels = PresenceLabels(idle="da", reflecting="denkt nach", source="zustand")
    assert presence_line(False, False, False, False, labels=labels) == "da"
    vector = build_presence_vector(
        AffectState(), CognitionState(reflection_pending=True), labels=labels
    )
    assert vector["line"] == "denkt nach"
    assert vector["source"] == "zustand"


@given(affect_states(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
@PROPERTY
def test_presence_vector_derives_carried_thought_from_the_state(
    state: AffectState, claimed: bool, reflecting: bool, due: bool, thread: bool
) -> None:
    cognition = CognitionState(
        carried_thought=claimed,
        reflection_pending=reflecting,
        due_intention=due,
        open_thread=thread,
    )
    vector = build_presence_vector(state, cognition)
    carrying = clean_text(state.carried_thought, 300) is not None
    assert vector["cognition"]["carried_thought"] is carrying
    assert vector["line"] == presence_line(reflecting, due, carrying, thread)
    assert vector["awaiting"] is reflecting
    assert vector["mode"] == ("reflecting" if reflecting else "quiet")


@given(affect_states())
@PROPERTY
def test_presence_vector_has_the_fixed_shape_and_rounded_numbers(state: AffectState) -> None:
    snapshot = state.model_dump()
    vector = build_presence_vector(state)
    assert state.model_dump() == snapshot
    assert set(vector) == VECTOR_KEYS
    assert set(vector["affect"]) == {"valence", "arousal", "dominance"}
    assert set(vector["relationship"]) == {"stage", "trust", "longing", "comfort"}
    assert vector["source"] == "affect_state"
    numbers = [
        vector["trust"],
        vector["valence"],
        vector["arousal"],
        vector["longing"],
        *vector["affect"].values(),
        *(v for k, v in vector["relationship"].items() if k != "stage"),
    ]
    assert all(round(n, 4) == n for n in numbers)
    assert vector["affect"]["dominance"] == round(state.mood.dominance, 4)
    assert vector["relationship"]["stage"] == state.relationship.stage
    assert vector["relationship"]["comfort"] == round(state.relationship.comfort, 4)


def test_presence_vector_without_cognition_reports_every_flag_false() -> None:
    vector = build_presence_vector(AffectState(carried_thought=None))
    assert vector["cognition"] == {
        "reflection_pending": False,
        "carried_thought": False,
        "due_intention": False,
        "open_thread": False,
        "intentionality": False,
        "curiosity": False,
    }
    assert vector["line"] == "here with you"
