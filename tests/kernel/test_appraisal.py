"""Default appraisal: inertia, stage ladder, mood decay, impulses, carry, expectations, turns."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affect_memory.kernel import (
    BUILTIN_INTENTS,
    DEFAULT_AFFECT_DYNAMICS,
    AffectDynamics,
    AffectState,
    DefaultAppraisalPolicy,
    EmotionMap,
    ExpectationCues,
    Goals,
    InvalidInputError,
    Mood,
    Personality,
    RelationshipState,
    StageLadder,
    UnknownStageError,
    appraise_input,
    appraise_turn,
    baseline_weight,
    decay_mood,
    decay_occ_carry,
    expectation_emotions,
    mood_inertia,
    stage_int,
    state_emotions,
)
from tests.kernel.strategies import (
    PROPERTY,
    STAGES,
    affect_states,
    emotion_dicts,
    goals,
    intents,
    moods,
    personalities,
    signed,
    stage_labels,
    unit,
)

BASE_EMOTIONS = {"joy", "distress", "admiration", "reproach", "gratitude"}


def _in_domain(mood: Mood) -> bool:
    return all(-1.0 <= x <= 1.0 for x in (mood.valence, mood.arousal, mood.dominance))


def _is_rounded(value: float, places: int) -> bool:
    return round(value, places) == value


# --- mood inertia and the stage ladder -----------------------------------------------------


@given(personalities())
@PROPERTY
def test_mood_inertia_stays_within_its_clamps(personality: Personality) -> None:
    assert 0.62 <= mood_inertia(personality) <= 0.92


@given(unit(), unit(), unit())
@PROPERTY
def test_mood_inertia_depends_only_on_neuroticism_and_extraversion(
    n: float, e: float, other: float
) -> None:
    base = Personality(neuroticism=n, extraversion=e)
    varied = Personality(
        neuroticism=n, extraversion=e, openness=other, conscientiousness=other, agreeableness=other
    )
    assert mood_inertia(base) == mood_inertia(varied)


def test_mood_inertia_floor_binds_only_with_other_dynamics() -> None:
    fickle = Personality(neuroticism=0.0, extraversion=1.0)
    assert mood_inertia(fickle) == pytest.approx(0.65)
    assert mood_inertia(fickle, dynamics=AffectDynamics(inertia_base=0.5)) == 0.62


@pytest.mark.parametrize("ordinal, label", list(enumerate(STAGES, start=1)))
def test_stage_int_is_one_based_and_round_trips_baseline_weight(ordinal: int, label: str) -> None:
    assert stage_int(label) == ordinal
    assert baseline_weight(ordinal) == (0.0, 0.20, 0.40, 0.60, 0.70)[ordinal - 1]


@pytest.mark.parametrize("label", ["mystery", "Friend", "FRIEND", " friend", ""])
def test_stage_int_maps_unknown_labels_to_one_unless_strict(label: str) -> None:
    assert stage_int(label) == 1
    with pytest.raises(UnknownStageError, match=repr(label)):
        stage_int(label, ladder=StageLadder(strict=True))


def test_stage_int_refuses_a_non_string() -> None:
    with pytest.raises(InvalidInputError, match="stage"):
        stage_int(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("ordinal", [0, 6, -1, 99])
def test_baseline_weight_is_zero_off_the_ladder(ordinal: int) -> None:
    assert baseline_weight(ordinal) == 0.0


@pytest.mark.parametrize("bad", [True, 2.0, "2", None])
def test_baseline_weight_refuses_what_is_not_an_int(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="stage ordinal"):
        baseline_weight(bad)  # type: ignore[arg-type]


def test_stage_ladder_needs_one_weight_per_stage() -> None:
    with pytest.raises(ValueError, match="one weight per stage"):
        StageLadder(stages=("a", "b"), weights=(0.0,))
    custom = StageLadder(stages=("new", "old"), weights=(0.0, 0.5))
    assert stage_int("old", ladder=custom) == 2
    assert baseline_weight(2, ladder=custom) == 0.5


# --- mood decay ------------------------------------------------------------------------------


@given(moods(), personalities(), stage_labels(), signed())
@PROPERTY
def test_decay_mood_keeps_every_component_in_domain(
    mood: Mood, personality: Personality, stage: str, baseline: float
) -> None:
    decayed = decay_mood(mood, personality, stage, baseline)
    assert _in_domain(decayed)
    for value in (decayed.valence, decayed.arousal, decayed.dominance):
        assert _is_rounded(value, 4)


@given(moods(), personalities(), stage_labels(), signed())
@PROPERTY
def test_decay_mood_moves_each_component_toward_the_resting_point(
    mood: Mood, personality: Personality, stage: str, baseline: float
) -> None:
    weight = baseline_weight(stage_int(stage))
    rest = (weight * baseline, 0.0, weight * 0.10)
    decayed = decay_mood(mood, personality, stage, baseline)
    for r, before, after in zip(
        rest,
        (mood.valence, mood.arousal, mood.dominance),
        (decayed.valence, decayed.arousal, decayed.dominance),
        strict=True,
    ):
        low, high = sorted((r, before))
        assert low - 5e-5 <= after <= high + 5e-5  # within the 4-decimal rounding
        assert abs(after - r) <= abs(before - r) + 5e-5


@given(moods(), personalities(), st.sampled_from(STAGES), signed())
@PROPERTY
def test_decay_mood_takes_a_stage_label_or_its_ordinal(
    mood: Mood, personality: Personality, stage: str, baseline: float
) -> None:
    assert decay_mood(mood, personality, stage, baseline) == decay_mood(
        mood, personality, stage_int(stage), baseline
    )


@given(moods(), personalities(), signed())
@PROPERTY
def test_decay_mood_treats_an_unknown_stage_like_the_first(
    mood: Mood, personality: Personality, baseline: float
) -> None:
    expected = decay_mood(mood, personality, "stranger", baseline)
    assert decay_mood(mood, personality, "mystery", baseline) == expected
    assert decay_mood(mood, personality, 6, baseline) == expected
    assert decay_mood(mood, personality, 0, baseline) == expected


# --- intent impulses ---------------------------------------------------------------------------


@given(moods(), goals(), intents(), signed())
@PROPERTY
def test_appraise_input_keeps_mood_emotions_and_baseline_in_domain(
    mood: Mood, goal: Goals, intent: str, baseline: float
) -> None:
    result = appraise_input(mood, goal, intent, baseline)
    assert _in_domain(result.mood)
    assert -1.0 <= result.baseline_valence <= 1.0
    assert _is_rounded(result.baseline_valence, 4)
    assert set(result.emotions) == BASE_EMOTIONS
    assert all(0.0 <= value <= 1.0 for value in result.emotions.values())


@given(moods(), goals(), signed(), st.sampled_from(["casual", "Casual", "GREETING", "", " ABUSE"]))
@PROPERTY
def test_appraise_input_leaves_mood_unchanged_for_an_unknown_intent(
    mood: Mood, goal: Goals, baseline: float, intent: str
) -> None:
    result = appraise_input(mood, goal, intent, baseline)
    assert result.mood == mood
    assert dict(result.emotions) == dict.fromkeys(BASE_EMOTIONS, 0.0)
    assert result.baseline_valence == round(0.98 * baseline + 0.02 * mood.valence, 4)


@given(moods(), goals(), signed())
@PROPERTY
def test_appraise_input_casual_joy_is_exactly_five_hundredths(
    mood: Mood, goal: Goals, baseline: float
) -> None:
    assert appraise_input(mood, goal, "CASUAL", baseline).emotions["joy"] == 0.05


@given(moods(), goals(), signed())
@PROPERTY
def test_appraise_input_unambiguous_intents_shift_without_widening(
    mood: Mood, goal: Goals, baseline: float
) -> None:
    # NEGLECT: V-.10, A-.05 with a one-sided clamp, never widened or rounded.
    result = appraise_input(mood, goal, "NEGLECT", baseline)
    assert result.mood.valence == max(-1.0, mood.valence - 0.10)
    assert result.mood.arousal == max(-1.0, mood.arousal - 0.05)
    assert result.mood.dominance == mood.dominance
    assert result.emotions["distress"] == min(1.0, goal.rapport * 0.40)


def test_appraise_input_widening_is_a_caller_owned_parameter() -> None:
    mood = Mood(valence=0.5)
    default = appraise_input(mood, Goals(), "CASUAL", 0.0)
    assert default.mood.valence == pytest.approx(0.5408)
    flat = appraise_input(mood, Goals(), "CASUAL", 0.0, dynamics=AffectDynamics(widen_positive=1.0))
    assert flat.mood.valence == pytest.approx(0.52)


def test_every_builtin_intent_has_an_impulse() -> None:
    assert set(BUILTIN_INTENTS) == {
        "ABUSE",
        "APOLOGY",
        "VULNERABILITY",
        "CURIOSITY",
        "CHALLENGE",
        "NEGLECT",
        "CASUAL",
    }
    for intent in BUILTIN_INTENTS:
        assert DEFAULT_AFFECT_DYNAMICS.impulse(intent) is not None
    assert DEFAULT_AFFECT_DYNAMICS.impulse("casual") is None


# --- expectation cues ---------------------------------------------------------------------


def test_expectation_cues_are_replaceable() -> None:
    spanish = ExpectationCues(
        negative_expected=("enfadada",),
        positive_current=("bien",),
        negative_current=("peor",),
        expected_resolution=("disculp-",),
    )
    assert expectation_emotions("estaba enfadada", "todo bien", cues=spanish) == {
        "relief": 0.45,
        "surprise": 0.35,
    }
    assert expectation_emotions("estaba enfadada", "todo bien") == {}
    assert expectation_emotions("disculpas", "peor", cues=spanish) == {"disappointment": 0.4}


def test_expectation_emotions_returns_a_fresh_dict_each_call() -> None:
    first = expectation_emotions("she was angry", "better now")
    first["relief"] = 0.0
    assert expectation_emotions("she was angry", "better now")["relief"] == 0.45


@given(st.text(max_size=30), st.text(max_size=30))
@PROPERTY
def test_expectation_emotions_gives_one_of_the_four_outcomes(
    expectation: str, message: str
) -> None:
    outcome = expectation_emotions(expectation, message)
    assert outcome in (
        {},
        {"relief": 0.45, "surprise": 0.35},
        {"disappointment": 0.4},
        {"satisfaction": 0.4},
    )
    if not expectation or not message:
        assert outcome == {}


@given(st.text(alphabet=string.ascii_letters + " ", max_size=30))
@PROPERTY
def test_expectation_cues_ignore_case(message: str) -> None:
    assert expectation_emotions("SHE WAS UPSET", message.upper() + " FINE") == (
        expectation_emotions("she was upset", message.lower() + " fine")
    )


# --- carry and state emotions ---------------------------------------------------------------


@given(emotion_dicts())
@PROPERTY
def test_decay_occ_carry_only_shrinks_and_drops_at_the_floor(carry: dict[str, float]) -> None:
    before = dict(carry)
    decayed = decay_occ_carry(carry)
    assert carry == before
    assert set(decayed) <= set(carry)
    for name, value in decayed.items():
        assert 0.05 < value < carry[name]
        assert value == carry[name] * DEFAULT_AFFECT_DYNAMICS.decay_rate(name)
    for name in set(carry) - set(decayed):
        assert carry[name] * DEFAULT_AFFECT_DYNAMICS.decay_rate(name) <= 0.05


def test_decay_occ_carry_floor_and_rates_are_caller_owned() -> None:
    dynamics = AffectDynamics(carry_floor=0.5, carry_decay=(("joy", 0.5),), carry_decay_default=1.0)
    assert decay_occ_carry({"joy": 0.8, "hope": 0.6, "fear": 0.4}, dynamics=dynamics) == {
        "hope": 0.6
    }


@given(moods(), unit())
@PROPERTY
def test_state_emotions_stay_in_domain_and_follow_their_thresholds(
    mood: Mood, longing: float
) -> None:
    emotions = state_emotions(mood, longing)
    assert set(emotions) <= {"fatigue", "longing", "unease"}
    assert all(0.0 <= value <= 1.0 and _is_rounded(value, 3) for value in emotions.values())
    assert ("fatigue" in emotions) == (mood.arousal < 0)
    assert ("longing" in emotions) == (longing > 0.3)
    assert ("unease" in emotions) == (-0.3 < mood.valence < 0)
    assert emotions.get("unease", 0.0) <= 0.3


# --- whole turns -------------------------------------------------------------------------------


@given(affect_states(), intents(), st.none() | emotion_dicts(), st.text(max_size=30))
@PROPERTY
def test_appraise_turn_keeps_the_state_in_domain_and_changes_only_affect(
    state: AffectState, intent: str, carry: dict[str, float] | None, message: str
) -> None:
    snapshot = state.model_dump()
    outcome = appraise_turn(state, intent, carry, None, message)
    after = outcome.state
    assert state.model_dump() == snapshot
    assert _in_domain(after.mood)
    assert -1.0 <= after.baseline_valence <= 1.0
    assert all(0.0 <= v <= 1.0 for v in outcome.active_emotions.values())
    assert set(outcome.active_emotions) >= BASE_EMOTIONS
    assert dict(after.occ_carry) == {k: v for k, v in outcome.active_emotions.items() if v > 0.05}
    unchanged = ("personality", "goals", "relationship", "attachment", "carried_thought")
    for name in (*unchanged, "expectation"):
        assert getattr(after, name) == getattr(state, name)
    assert outcome.intent == intent


@given(affect_states(), intents(), st.text(max_size=30))
@PROPERTY
def test_appraise_turn_merges_by_maximum(state: AffectState, intent: str, message: str) -> None:
    outcome = appraise_turn(state, intent, message=message)
    decayed = decay_mood(
        state.mood, state.personality, state.relationship.stage, state.baseline_valence
    )
    fresh = appraise_input(decayed, state.goals, intent, state.baseline_valence)
    carried = decay_occ_carry(state.occ_carry)
    merged = {
        name: max(fresh.emotions.get(name, 0.0), carried.get(name, 0.0))
        for name in {*fresh.emotions, *carried}
    }
    # State and expectation emotions are folded in where larger, a missing name counting as 0.
    folded = [
        state_emotions(fresh.mood, state.attachment.longing),
        expectation_emotions(state.expectation or "", message),
    ]
    for part in folded:
        for name, value in part.items():
            if value > merged.get(name, 0.0):
                merged[name] = value
    assert dict(outcome.active_emotions) == merged
    assert outcome.state.mood == fresh.mood


def test_appraise_turn_prefers_a_passed_expectation_and_carry_over_the_states() -> None:
    state = AffectState(expectation="she was upset", occ_carry=EmotionMap({"reproach": 0.9}))
    from_state = appraise_turn(state, "CASUAL", message="fine now")
    assert from_state.active_emotions["relief"] == 0.45
    assert from_state.active_emotions["reproach"] == pytest.approx(0.63)
    passed = appraise_turn(state, "CASUAL", {}, "tell me", "fine now")
    assert "relief" not in passed.active_emotions
    assert passed.active_emotions["satisfaction"] == 0.4
    assert passed.active_emotions["reproach"] == 0.0


def test_appraise_turn_treats_an_explicit_empty_expectation_as_no_expectation() -> None:
    state = AffectState(expectation="she was upset")
    assert appraise_turn(state, "CASUAL", message="things are better").active_emotions[
        "relief"
    ] == 0.45
    explicit_none = appraise_turn(state, "CASUAL", None, "", "things are better")
    assert "relief" not in explicit_none.active_emotions
    assert "surprise" not in explicit_none.active_emotions
    no_expectation = appraise_turn(AffectState(), "CASUAL", None, None, "things are better")
    assert explicit_none.active_emotions == no_expectation.active_emotions
    assert explicit_none.state.occ_carry == no_expectation.state.occ_carry


@pytest.mark.parametrize(
    ("mood", "absent"),
    [
        # arousal -0.0004 decays to -0.0003 (an unknown intent adds no impulse): fatigue 0.0
        (Mood(arousal=-0.0004), "fatigue"),
        # valence -0.0004 decays to -0.0003: unease round3(0.0003) is 0.0
        (Mood(valence=-0.0004), "unease"),
    ],
)
def test_appraise_turn_leaves_out_state_emotions_that_round_to_zero(
    mood: Mood, absent: str
) -> None:
    state = AffectState(mood=mood)
    assert state_emotions(appraise_turn(state, "NONE").state.mood, 0.0)[absent] == 0.0
    outcome = appraise_turn(state, "NONE")
    assert absent not in outcome.active_emotions
    assert absent not in outcome.state.occ_carry


def test_appraise_turn_reads_the_stage_from_the_relationship() -> None:
    mood = Mood(valence=0.0)
    stranger = AffectState(mood=mood, baseline_valence=1.0)
    intimate = stranger.model_copy(update={"relationship": RelationshipState(stage="intimate")})
    # Unknown intent: only decay moves the mood, toward 0.70 × baseline for intimate.
    assert appraise_turn(stranger, "NONE").state.mood.valence == 0.0
    expected = round(0.70 * 1.0 + 0.735 * (0.0 - 0.70 * 1.0), 4)
    assert appraise_turn(intimate, "NONE").state.mood.valence == pytest.approx(expected)


@given(affect_states(), st.text(max_size=20))
@PROPERTY
def test_default_policy_is_appraise_turn(state: AffectState, message: str) -> None:
    policy = DefaultAppraisalPolicy()
    assert policy.appraise(state, "CURIOSITY", message) == appraise_turn(
        state, "CURIOSITY", message=message
    )


@pytest.mark.parametrize("rate", [1.01, -0.1, True])
def test_carry_decay_rates_must_be_in_the_unit_interval(rate: object) -> None:
    with pytest.raises(ValueError, match="carry_decay"):
        AffectDynamics(carry_decay_default=rate)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="carry_decay"):
        AffectDynamics(carry_decay=(("joy", rate),))  # type: ignore[arg-type]


def test_decay_occ_carry_of_none_is_empty_as_in_the_reference() -> None:
    assert decay_occ_carry(None) == {}


@pytest.mark.parametrize(
    ("carry", "named"),
    [
        ("joy", "carry"),
        ({"joy": "0.5"}, "'joy'"),
        ({"joy": 1.5}, "'joy'"),
        ({"joy": True}, "'joy'"),
        ({None: 0.5}, "None"),
    ],
)
def test_decay_occ_carry_refuses_what_is_not_an_emotion_map(carry: object, named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        decay_occ_carry(carry)  # type: ignore[arg-type]


def test_expectation_emotions_of_none_is_empty() -> None:
    assert expectation_emotions(None, "things are better") == {}
    assert expectation_emotions("she was upset", None) == {}
    with pytest.raises(InvalidInputError, match="message"):
        expectation_emotions("she was upset", 5)  # type: ignore[arg-type]
