"""Parameter objects refuse every value outside their domain, naming Class.field and the value."""

from __future__ import annotations

import inspect
import math
from typing import Any

import pytest
from pydantic import ValidationError

from affect_memory import kernel
from affect_memory.kernel import (
    AffectControls,
    AffectDynamics,
    DefaultAppraisalPolicy,
    EmotionSignal,
    EngineLimits,
    EvidenceLimits,
    ExpectationCues,
    IntentImpulse,
    PresenceLabels,
    PromptWording,
    RetrievalWeights,
    StageLadder,
    mood_inertia,
)
from affect_memory.kernel.models import FrozenModel
from affect_memory.kernel.parameters import ParameterModel, first_message

PARAMETER_OBJECTS: list[type[FrozenModel]] = [
    AffectControls,
    AffectDynamics,
    DefaultAppraisalPolicy,
    EmotionSignal,
    EngineLimits,
    EvidenceLimits,
    ExpectationCues,
    IntentImpulse,
    PresenceLabels,
    PromptWording,
    RetrievalWeights,
    StageLadder,
]
REQUIRED: dict[type[FrozenModel], dict[str, Any]] = {
    EmotionSignal: {"emotion": "joy", "coefficient": 0.5},
    IntentImpulse: {"intent": "X"},
}
FIVE_STAGES = ("stranger", "acquaintance", "friend", "close", "intimate")


def refusal(model: type[FrozenModel], **values: Any) -> str:
    """The first error message of building ``model`` from ``values`` (which must fail)."""
    with pytest.raises(ValidationError) as caught:
        model(**{**REQUIRED.get(model, {}), **values})
    return first_message(caught.value)


# (model, values, the Class.field the error must name, the bad value as the error shows it)
REFUSED: list[tuple[type[FrozenModel], dict[str, Any], str, str]] = [
    # stages: duplicate, empty or blank names, and a weight of 1.5
    (StageLadder, {"stages": ("a", "a"), "weights": (0.1, 0.2)}, "StageLadder.stages", "'a'"),
    (StageLadder, {"stages": ("a", ""), "weights": (0.1, 0.2)}, "StageLadder.stages[1]", "''"),
    (StageLadder, {"stages": (" ", "b"), "weights": (0.1, 0.2)}, "StageLadder.stages[0]", "' '"),
    (
        StageLadder,
        {"stages": FIVE_STAGES, "weights": (0.0, 0.2, 1.5, 0.6, 0.7)},
        "StageLadder.weights[2]",
        "1.5",
    ),
    (StageLadder, {"weights": (0.0, -0.2, 0.4, 0.6, 0.7)}, "StageLadder.weights[1]", "-0.2"),
    (StageLadder, {"stages": ("a",) * 0, "weights": ()}, "StageLadder.stages", "()"),
    (StageLadder, {"stages": ("a", "b"), "weights": (0.1,)}, "StageLadder.weights", "(0.1,)"),
    # dynamics
    (AffectDynamics, {"inertia_base": 1.5}, "AffectDynamics.inertia_base", "1.5"),
    (AffectDynamics, {"inertia_min": -0.1}, "AffectDynamics.inertia_min", "-0.1"),
    (AffectDynamics, {"inertia_max": 1.2}, "AffectDynamics.inertia_max", "1.2"),
    (
        AffectDynamics,
        {"inertia_min": 0.9, "inertia_max": 0.8},
        "AffectDynamics.inertia_min",
        "0.9",
    ),
    (AffectDynamics, {"carry_floor": 2.0}, "AffectDynamics.carry_floor", "2.0"),
    (AffectDynamics, {"carry_decay": (("", 0.5),)}, "AffectDynamics.carry_decay[0][0]", "''"),
    (
        AffectDynamics,
        {"carry_decay": (("joy", 0.5), ("joy", 0.6))},
        "AffectDynamics.carry_decay",
        "'joy'",
    ),
    (AffectDynamics, {"rest_dominance": -2}, "AffectDynamics.rest_dominance", "-2"),
    (AffectDynamics, {"widen_threshold": 1.5}, "AffectDynamics.widen_threshold", "1.5"),
    (AffectDynamics, {"baseline_retention": 1.5}, "AffectDynamics.baseline_retention", "1.5"),
    (AffectDynamics, {"longing_threshold": -0.3}, "AffectDynamics.longing_threshold", "-0.3"),
    (AffectDynamics, {"unease_floor": -1.5}, "AffectDynamics.unease_floor", "-1.5"),
    (
        AffectDynamics,
        {"impulses": (IntentImpulse(intent="X"), IntentImpulse(intent="X"))},
        "AffectDynamics.impulses",
        "'X'",
    ),
    # impulses and their signals: a whitespace emotion name, duplicates, blank intents
    (EmotionSignal, {"emotion": " "}, "EmotionSignal.emotion", "' '"),
    (EmotionSignal, {"emotion": "e" * 65}, "EmotionSignal.emotion", "'eeee"),
    (EmotionSignal, {"coefficient": -0.5}, "EmotionSignal.coefficient", "-0.5"),
    (EmotionSignal, {"coefficient": 1.5}, "EmotionSignal.coefficient", "1.5"),
    (IntentImpulse, {"intent": "  "}, "IntentImpulse.intent", "'  '"),
    (IntentImpulse, {"valence": 2.5}, "IntentImpulse.valence", "2.5"),
    (
        IntentImpulse,
        {"signals": (EmotionSignal(emotion="joy", coefficient=0.1),) * 2},
        "IntentImpulse.signals",
        "'joy'",
    ),
    # expectation cues: blank cues and duplicates
    (
        ExpectationCues,
        {"negative_expected": ("angry", "")},
        "ExpectationCues.negative_expected[1]",
        "''",
    ),
    (
        ExpectationCues,
        {"positive_current": ("\t",)},
        "ExpectationCues.positive_current[0]",
        "'\\t'",
    ),
    (
        ExpectationCues,
        {"expected_resolution": ("tell", "-")},
        "ExpectationCues.expected_resolution[1]",
        "'-'",
    ),
    (
        ExpectationCues,
        {"negative_current": ("bad", "Bad")},
        "ExpectationCues.negative_current",
        "'bad'",
    ),
    # prompt wording: a negative threshold, empty instructions, whitespace emotion names
    (PromptWording, {"emotion_threshold": -0.1}, "PromptWording.emotion_threshold", "-0.1"),
    (PromptWording, {"emotions": (("joy", ""),)}, "PromptWording.emotions[0][1]", "''"),
    (PromptWording, {"emotions": ((" ", "Be kind."),)}, "PromptWording.emotions[0][0]", "' '"),
    (
        PromptWording,
        {"emotions": (("joy", "A."), ("joy", "B."))},
        "PromptWording.emotions",
        "'joy'",
    ),
    (PromptWording, {"low_valence": " "}, "PromptWording.low_valence", "' '"),
    (PromptWording, {"high_arousal_above": 1.5}, "PromptWording.high_arousal_above", "1.5"),
    # response controls and retrieval weights
    (AffectControls, {"neutral_deadband": 1.5}, "AffectControls.neutral_deadband", "1.5"),
    (AffectControls, {"low_arousal_factor": 1.5}, "AffectControls.low_arousal_factor", "1.5"),
    (
        AffectControls,
        {"temperature_min": 1.2, "temperature_max": 1.1},
        "AffectControls.temperature_min",
        "1.2",
    ),
    (AffectControls, {"low_valence_threshold": -2}, "AffectControls.low_valence_threshold", "-2"),
    (RetrievalWeights, {"recency_floor": 0.0}, "RetrievalWeights.recency_floor", "0.0"),
    (RetrievalWeights, {"recency_floor": 1.5}, "RetrievalWeights.recency_floor", "1.5"),
    (RetrievalWeights, {"recency_fallback": 1.5}, "RetrievalWeights.recency_fallback", "1.5"),
    (
        RetrievalWeights,
        {"recency_horizon_days": 0.0},
        "RetrievalWeights.recency_horizon_days",
        "0.0",
    ),
    (
        RetrievalWeights,
        {"congruence_threshold": 1.5},
        "RetrievalWeights.congruence_threshold",
        "1.5",
    ),
    # limits and the policy's name
    (EvidenceLimits, {"per_item": -1}, "EvidenceLimits.per_item", "-1"),
    (EngineLimits, {"retrieval_limit": -1}, "EngineLimits.retrieval_limit", "-1"),
    (EngineLimits, {"max_message_chars": 0}, "EngineLimits.max_message_chars", "0"),
    (DefaultAppraisalPolicy, {"name": " "}, "DefaultAppraisalPolicy.name", "' '"),
]


@pytest.mark.parametrize(
    ("model", "values", "field", "value"),
    REFUSED,
    ids=[f"{field}={value}" for _, _, field, value in REFUSED],
)
def test_parameter_objects_refuse_out_of_domain_values_naming_the_field_and_value(
    model: type[FrozenModel], values: dict[str, Any], field: str, value: str
) -> None:
    message = refusal(model, **values)
    assert message.startswith(field), message
    assert value in message


@pytest.mark.parametrize("field", sorted(PresenceLabels.model_fields))
@pytest.mark.parametrize("blank", ["", " ", "\n\t"])
def test_presence_labels_refuse_a_blank_label(field: str, blank: str) -> None:
    message = refusal(PresenceLabels, **{field: blank})
    assert message.startswith(f"PresenceLabels.{field} ")
    assert repr(blank) in message


def test_inertia_bounds_in_the_wrong_order_are_refused_rather_than_pinning_inertia() -> None:
    # Before, AffectDynamics(inertia_min=0.9, inertia_max=0.1) made mood_inertia return 0.1.
    message = refusal(AffectDynamics, inertia_min=0.9, inertia_max=0.1)
    assert "AffectDynamics.inertia_max" in message and "0.1" in message
    equal = AffectDynamics(inertia_min=0.7, inertia_max=0.7)
    assert mood_inertia(kernel.Personality(), dynamics=equal) == 0.7


def test_an_ungated_signal_above_one_is_refused_but_a_goal_scaled_one_is_not() -> None:
    assert "EmotionSignal.coefficient" in refusal(EmotionSignal, coefficient=1.5)
    assert EmotionSignal(emotion="joy", coefficient=1.5, goal="rapport").coefficient == 1.5


def test_a_long_bad_value_is_cut_in_the_message() -> None:
    message = refusal(PresenceLabels, idle=" " * 10_000)
    assert message.startswith("PresenceLabels.idle ")
    assert "(10000 characters)" in message
    assert len(message) < 400


def test_the_defaults_are_in_domain() -> None:
    for model in PARAMETER_OBJECTS:
        model(**REQUIRED.get(model, {}))


def test_every_parameter_object_is_a_parameter_model() -> None:
    for model in PARAMETER_OBJECTS:
        assert issubclass(model, ParameterModel), model.__name__
    # and every public parameter-like value type is listed above
    public = {
        value
        for name in kernel.__all__
        if inspect.isclass(value := getattr(kernel, name)) and issubclass(value, ParameterModel)
    }
    assert public == set(PARAMETER_OBJECTS)


NUMBER_FIELDS = [
    (model, field)
    for model in PARAMETER_OBJECTS
    for field, value in model(**REQUIRED.get(model, {})).model_dump().items()
    if isinstance(value, int | float) and not isinstance(value, bool)
]


@pytest.mark.parametrize(
    ("model", "field"), NUMBER_FIELDS, ids=[f"{m.__name__}.{f}" for m, f in NUMBER_FIELDS]
)
@pytest.mark.parametrize("bad", [math.nan, math.inf, True, "0.5"])
def test_every_number_field_names_itself_when_refused(
    model: type[FrozenModel], field: str, bad: object
) -> None:
    message = refusal(model, **{field: bad})
    assert message.startswith(f"{model.__name__}.{field} "), message
    assert repr(bad) in message

