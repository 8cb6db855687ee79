"""System-prompt assembly and the bounded untrusted-evidence channel."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affect_memory.kernel import (
    DEFAULT_PROMPT_WORDING,
    AffectState,
    EvidenceLimits,
    Mood,
    PromptWording,
    build_system_prompt,
    build_untrusted_context,
)
from tests.kernel.strategies import PROPERTY, affect_states, emotion_dicts

SENTINEL = "ZQX-untrusted-7f3a"
"""A marker that no wording contains, planted in every untrusted input."""

W = DEFAULT_PROMPT_WORDING


@given(affect_states(), emotion_dicts(), st.text(max_size=40))
@PROPERTY
def test_system_prompt_never_contains_the_carried_thought(
    state: AffectState, emotions: dict[str, float], noise: str
) -> None:
    planted = state.model_copy(update={"carried_thought": f"{noise}{SENTINEL}{noise}"})
    prompt = build_system_prompt(planted, emotions)
    assert SENTINEL not in prompt
    without = planted.model_copy(update={"carried_thought": None})
    assert prompt == build_system_prompt(without, emotions)


def test_system_prompt_has_no_channel_for_memory_text() -> None:
    parameters = set(inspect.signature(build_system_prompt).parameters)
    assert parameters == {"state", "emotions", "wording", "turn_shape"}


@given(affect_states(), emotion_dicts())
@PROPERTY
def test_system_prompt_is_made_only_of_caller_wording(
    state: AffectState, emotions: dict[str, float]
) -> None:
    prompt = build_system_prompt(state, emotions)
    sentences = [
        W.base,
        W.affect_rule,
        W.high_arousal,
        W.low_arousal,
        W.low_valence,
        W.high_dominance,
        W.turn_shape,
        *(text for _, text in W.emotions),
    ]
    remainder = prompt
    for sentence in sorted(sentences, key=len, reverse=True):
        remainder = remainder.replace(sentence, "")
    assert remainder.strip() == ""
    assert "\n\n\n" not in prompt


@pytest.mark.parametrize(
    "mood, present, absent",
    [
        (Mood(arousal=0.41), [W.high_arousal], [W.low_arousal]),
        (Mood(arousal=0.4), [], [W.high_arousal]),
        (Mood(arousal=-0.31), [W.low_arousal], [W.high_arousal]),
        (Mood(arousal=-0.3), [], [W.low_arousal]),
        (Mood(valence=-0.31), [W.low_valence], []),
        (Mood(valence=-0.3), [], [W.low_valence]),
        (Mood(dominance=0.51), [W.high_dominance], []),
        (Mood(dominance=0.5), [], [W.high_dominance]),
    ],
)
def test_each_mood_instruction_has_a_strict_threshold(
    mood: Mood, present: list[str], absent: list[str]
) -> None:
    prompt = build_system_prompt(AffectState(mood=mood), {})
    for text in present:
        assert text in prompt
    for text in absent:
        assert text not in prompt


def test_emotion_section_orders_strongest_first_then_by_name() -> None:
    emotions = {"joy": 0.5, "reproach": 0.9, "gratitude": 0.5, "distress": 0.3, "surprise": 0.99}
    prompt = build_system_prompt(AffectState(), emotions)
    instructions = dict(W.emotions)
    order = [instructions["reproach"], instructions["gratitude"], instructions["joy"]]
    positions = [prompt.index(text) for text in order]
    assert positions == sorted(positions)
    assert instructions["distress"] not in prompt  # 0.3 is not above the threshold


def test_empty_sections_are_omitted_and_turn_shape_can_be_overridden() -> None:
    prompt = build_system_prompt(AffectState(), {}, turn_shape="One line only.")
    assert prompt == W.section_separator.join([W.base, W.affect_rule, "One line only."])
    bare = build_system_prompt(AffectState(), {}, turn_shape="")
    assert bare == W.section_separator.join([W.base, W.affect_rule])


def test_custom_wording_replaces_every_sentence() -> None:
    wording = PromptWording(base="B.", affect_rule="R.", turn_shape="T.", emotions=(("joy", "J."),))
    prompt = build_system_prompt(AffectState(), {"joy": 0.9}, wording=wording)
    assert prompt == "B.\n\nR.\n\nJ.\n\nT."


# --- untrusted context --------------------------------------------------------------------


def test_thought_is_surfaced_only_on_the_first_turn_stripped_and_cut() -> None:
    thought = "  " + "t" * 2500 + "  "
    first = build_untrusted_context([], thought, first_turn=True)
    assert first.carried_thought == "t" * 2000
    later = build_untrusted_context([], thought, first_turn=False)
    assert later.carried_thought is None
    assert build_untrusted_context([], "   ", first_turn=True).carried_thought is None


def test_memories_share_what_the_thought_leaves_fairly() -> None:
    context = build_untrusted_context(["m" * 3000] * 4, "t" * 2000, first_turn=True)
    assert [len(text) for text in context.memory_texts] == [1500] * 4
    assert context.total_chars() == 8000


def test_fair_share_is_capped_per_item_and_short_items_leave_room_for_later_ones() -> None:
    context = build_untrusted_context(["a" * 100, "b" * 5000, "c" * 5000], None, first_turn=True)
    # shares: min(2000, 8000 // 3) = 2000 → 100 used; min(2000, 7900 // 2); min(2000, 5900)
    assert [len(text) for text in context.memory_texts] == [100, 2000, 2000]


def test_fair_share_uses_integer_division_of_what_remains() -> None:
    context = build_untrusted_context(["x" * 3000] * 7, None, first_turn=False)
    # 8000 // 7 = 1142, then 6858 // 6 = 1143, ... until the budget is spent.
    lengths = [len(text) for text in context.memory_texts]
    expected, remaining = [], 8000
    for left in range(7, 0, -1):
        share = min(2000, remaining // left)
        expected.append(share)
        remaining -= share
    assert lengths == expected
    assert sum(lengths) <= 8000


@given(
    st.lists(st.text(max_size=3000), max_size=9),
    st.none() | st.text(max_size=3000),
    st.booleans(),
)
@PROPERTY
def test_untrusted_context_respects_every_bound_and_keeps_rank_order(
    memories: list[str], thought: str | None, first_turn: bool
) -> None:
    before = list(memories)
    context = build_untrusted_context(memories, thought, first_turn=first_turn)
    assert memories == before
    assert context.total_chars() <= 8000
    assert all(len(text) <= 2000 for text in context.memory_texts)
    assert len(context.carried_thought or "") <= 2000
    if not first_turn:
        assert context.carried_thought is None
    assert len(context.memory_texts) == len(memories)
    for source, piece in zip(memories, context.memory_texts, strict=True):
        assert source.startswith(piece)


def test_build_untrusted_context_keeps_every_ranked_memory_slot_even_an_empty_one() -> None:
    assert build_untrusted_context(["", "abc"], None, first_turn=False).memory_texts == ("", "abc")
    # A memory whose share is spent keeps its (empty) slot too, so texts stay aligned with ranks.
    limits = EvidenceLimits(per_item=5, total=5)
    context = build_untrusted_context(["x", "abcdef", "yz"], "thought", first_turn=True,
                                      limits=limits)
    assert context.carried_thought == "thoug"
    assert context.memory_texts == ("", "", "")


def test_evidence_limits_are_caller_owned() -> None:
    limits = EvidenceLimits(per_item=5, total=12)
    context = build_untrusted_context(["abcdefgh"] * 3, "thought!", first_turn=True, limits=limits)
    assert context.carried_thought == "thoug"
    # 12 - 5 = 7 left: 7 // 3 = 2, then 5 // 2 = 2, then 3 // 1 = 3.
    assert context.memory_texts == ("ab", "ab", "abc")
