"""Response controls: octant, decoding, length budget and ambivalence."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affect_memory.kernel import (
    DEFAULT_AFFECT_CONTROLS,
    AffectControls,
    InvalidInputError,
    Mood,
    apply_length_factor,
    decoding_params,
    is_ambivalent,
    length_factor,
    mood_octant,
)
from tests.kernel.strategies import PROPERTY, emotion_dicts, moods, signed

# The table of algorithm.md, keyed by the signs of (valence, arousal, dominance).
SPEC_OCTANTS = {
    "+++": "exuberant",
    "++-": "dependent",
    "+-+": "relaxed",
    "+--": "docile",
    "-++": "hostile",
    "-+-": "anxious",
    "--+": "disdainful",
    "---": "bored",
}


def _signs(mood: Mood) -> str:
    return "".join("+" if x >= 0 else "-" for x in (mood.valence, mood.arousal, mood.dominance))


@pytest.mark.parametrize("signs", sorted(SPEC_OCTANTS))
def test_each_octant_label_matches_the_spec_table(signs: str) -> None:
    v, a, d = (0.5 if s == "+" else -0.5 for s in signs)
    assert mood_octant(Mood(valence=v, arousal=a, dominance=d)) == SPEC_OCTANTS[signs]


@given(moods())
@PROPERTY
def test_mood_octant_is_neutral_exactly_inside_the_deadband(mood: Mood) -> None:
    inside = all(abs(x) < 0.15 for x in (mood.valence, mood.arousal, mood.dominance))
    label = mood_octant(mood)
    assert (label == "neutral") == inside
    if not inside:
        assert label == SPEC_OCTANTS[_signs(mood)]


@pytest.mark.parametrize("component", ["valence", "arousal", "dominance"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_mood_octant_deadband_edge_is_exclusive(component: str, sign: float) -> None:
    assert mood_octant(Mood(**{component: sign * 0.1499})) == "neutral"
    label = mood_octant(Mood(**{component: sign * 0.15}))
    assert label != "neutral"
    # Leaving the band on one axis, the two zero components count as positive.
    assert label == SPEC_OCTANTS[_signs(Mood(**{component: sign * 0.15}))]


def test_mood_octant_deadband_is_a_caller_owned_parameter() -> None:
    mood = Mood(valence=0.3, arousal=0.0, dominance=0.0)
    assert mood_octant(mood) == "exuberant"
    assert mood_octant(mood, controls=AffectControls(neutral_deadband=0.5)) == "neutral"


def test_decoding_params_without_a_mood_has_no_top_p() -> None:
    params = decoding_params(None)
    assert params.temperature == 1.0
    assert params.top_p is None


@given(moods())
@PROPERTY
def test_decoding_temperature_stays_within_its_clamps(mood: Mood) -> None:
    params = decoding_params(mood)
    assert 0.72 <= params.temperature <= 1.18
    assert params.top_p == 0.97


@given(signed(), signed())
@PROPERTY
def test_decoding_temperature_is_monotone_in_arousal_only(a1: float, a2: float) -> None:
    low, high = sorted((a1, a2))
    t_low = decoding_params(Mood(arousal=low, valence=0.9)).temperature
    t_high = decoding_params(Mood(arousal=high, valence=-0.9, dominance=0.5)).temperature
    assert t_low <= t_high


def test_decoding_lower_clamp_binds_when_the_gain_can_reach_it() -> None:
    # With the default gain, arousal -1 gives 0.80; the 0.72 floor needs a steeper gain.
    steep = AffectControls(temperature_arousal_gain=0.5)
    assert decoding_params(Mood(arousal=-1.0), controls=steep).temperature == 0.72
    assert decoding_params(Mood(arousal=1.0), controls=steep).temperature == 1.18
    assert decoding_params(Mood(arousal=-1.0)).temperature == pytest.approx(0.8)


@given(moods())
@PROPERTY
def test_length_factor_is_one_of_the_three_spec_values(mood: Mood) -> None:
    factor = length_factor(mood)
    if mood.arousal < -0.30:
        assert factor == 0.60
    elif mood.valence < -0.30:
        assert factor == 0.72
    else:
        assert factor == 1.0


@given(st.integers(1, 100_000), moods() | st.none())
@PROPERTY
def test_apply_length_factor_never_increases_a_budget(base: int, mood: Mood | None) -> None:
    budget = apply_length_factor(base, mood)
    assert isinstance(budget, int)
    assert 1 <= budget <= base
    assert budget >= min(base, 180)


@given(st.integers(1, 100_000), moods())
@PROPERTY
def test_apply_length_factor_scales_only_when_the_factor_is_below_one(
    base: int, mood: Mood
) -> None:
    factor = length_factor(mood)
    budget = apply_length_factor(base, mood)
    if factor == 1.0:
        assert budget == base
    else:
        assert budget == min(base, max(180, round(base * factor)))


def test_apply_length_factor_floor_is_caller_owned() -> None:
    low = Mood(arousal=-0.9)
    assert apply_length_factor(1000, low) == 600
    assert apply_length_factor(1000, low, controls=AffectControls(token_floor=700)) == 700
    assert apply_length_factor(500, low, controls=AffectControls(token_floor=700)) == 500


@pytest.mark.parametrize("bad", [0, -1, True, False, 1.0, 240.5, "240", None])
def test_apply_length_factor_refuses_a_budget_that_is_not_a_positive_int(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="base_tokens"):
        apply_length_factor(bad, Mood())  # type: ignore[arg-type]


@given(emotion_dicts())
@PROPERTY
def test_is_ambivalent_ignores_names_outside_both_families(emotions: dict[str, float]) -> None:
    extra = {n: 1.0 for n in ("surprise", "longing", "fatigue", "Joy") if n not in emotions}
    assert is_ambivalent({**emotions, **extra}) == is_ambivalent(emotions)


@given(emotion_dicts())
@PROPERTY
def test_is_ambivalent_never_mutates_its_input(emotions: dict[str, float]) -> None:
    before = dict(emotions)
    is_ambivalent(emotions)
    assert emotions == before


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
@PROPERTY
def test_is_ambivalent_follows_floor_and_ratio(pos: float, neg: float) -> None:
    expected = pos >= 0.15 and neg >= 0.15 and min(pos, neg) / max(pos, neg) >= 0.40
    assert is_ambivalent({"hope": pos, "sadness": neg}) == expected
    assert is_ambivalent({"sadness": neg, "hope": pos, "relief": pos / 2}) == expected


@pytest.mark.parametrize(
    "emotions, expected",
    [
        ({"joy": 0.15, "fear": 0.15}, True),
        ({"joy": 0.1499, "fear": 0.15}, False),
        ({"joy": 0.15, "fear": 0.1499}, False),
        ({"joy": 0.5, "fear": 0.2}, True),
        ({"joy": 0.2, "fear": 0.5}, True),
        ({"joy": 0.5, "fear": 0.1999}, False),
    ],
)
def test_is_ambivalent_floor_and_ratio_are_inclusive(
    emotions: dict[str, float], expected: bool
) -> None:
    assert is_ambivalent(emotions) is expected


def test_is_ambivalent_uses_each_familys_strongest_member() -> None:
    # joy 0.2 alone against distress 0.6 is below 0.40; relief 0.3 lifts the positive side.
    assert not is_ambivalent({"joy": 0.2, "distress": 0.6})
    assert is_ambivalent({"joy": 0.2, "relief": 0.3, "distress": 0.6})


def test_default_controls_carry_the_spec_constants() -> None:
    c = DEFAULT_AFFECT_CONTROLS
    assert (c.neutral_deadband, c.temperature_min, c.temperature_max, c.top_p) == (
        0.15,
        0.72,
        1.18,
        0.97,
    )
    assert (c.low_arousal_factor, c.low_valence_factor, c.token_floor) == (0.60, 0.72, 180)
    assert (c.ambivalence_floor, c.ambivalence_ratio) == (0.15, 0.40)


def test_is_ambivalent_with_a_zero_floor_needs_both_families_present() -> None:
    open_floor = AffectControls(ambivalence_floor=0.0, ambivalence_ratio=0.0)
    assert not is_ambivalent({}, controls=open_floor)
    assert not is_ambivalent({"joy": 0.5}, controls=open_floor)
    assert is_ambivalent({"joy": 0.5, "fear": 0.01}, controls=open_floor)


def test_is_ambivalent_of_none_is_false_as_in_the_reference() -> None:
    assert is_ambivalent(None) is False


@pytest.mark.parametrize(
    ("emotions", "named"),
    [
        ("joy", "emotions"),
        ([("joy", 0.5)], "emotions"),
        ({"joy": "0.5", "fear": 0.5}, "'joy'"),
        ({"joy": 0.5, "fear": 1.5}, "'fear'"),
        ({"joy": math.nan, "fear": 0.5}, "'joy'"),
        ({3: 0.5}, "3"),
    ],
)
def test_is_ambivalent_refuses_what_is_not_an_emotion_map(emotions: object, named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        is_ambivalent(emotions)  # type: ignore[arg-type]
