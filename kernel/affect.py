"""Response controls derived from mood: octant label, decoding, length budget, ambivalence."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import model_validator

from affect_memory.kernel.bounds import (
    FiniteFloat,
    NonNegativeFloat,
    PositiveInt,
    SignedUnit,
    UnitInterval,
    check_int,
)
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.models import DecodingParams, Mood, as_emotion_map
from affect_memory.kernel.parameters import ParameterModel

__all__ = [
    "DEFAULT_AFFECT_CONTROLS",
    "NEGATIVE_EMOTIONS",
    "POSITIVE_EMOTIONS",
    "AffectControls",
    "apply_length_factor",
    "decoding_params",
    "is_ambivalent",
    "length_factor",
    "mood_octant",
]

POSITIVE_EMOTIONS = frozenset({"joy", "admiration", "gratitude", "relief", "satisfaction", "hope"})
"""The family whose strongest member is the positive side of ambivalence."""

NEGATIVE_EMOTIONS = frozenset(
    {"distress", "reproach", "fear", "disappointment", "unease", "anger", "sadness"}
)
"""The family whose strongest member is the negative side of ambivalence."""

_OCTANTS = {
    (True, True, True): "exuberant",
    (True, True, False): "dependent",
    (True, False, True): "relaxed",
    (True, False, False): "docile",
    (False, True, True): "hostile",
    (False, True, False): "anxious",
    (False, False, True): "disdainful",
    (False, False, False): "bored",
}


class AffectControls(ParameterModel):
    """The constants of the response controls; see docs/kernel/constants.md."""

    neutral_deadband: UnitInterval = 0.15
    temperature_base: NonNegativeFloat = 1.0
    temperature_arousal_gain: FiniteFloat = 0.20
    temperature_min: NonNegativeFloat = 0.72
    temperature_max: NonNegativeFloat = 1.18
    top_p: UnitInterval = 0.97
    low_arousal_threshold: SignedUnit = -0.30
    low_arousal_factor: UnitInterval = 0.60
    """A budget factor; it only ever shortens a reply."""
    low_valence_threshold: SignedUnit = -0.30
    low_valence_factor: UnitInterval = 0.72
    token_floor: PositiveInt = 180
    ambivalence_floor: UnitInterval = 0.15
    ambivalence_ratio: UnitInterval = 0.40

    @model_validator(mode="after")
    def _temperature_range(self) -> AffectControls:
        if self.temperature_min > self.temperature_max:
            raise ValueError(
                f"AffectControls.temperature_min {shown(self.temperature_min)} must not be above "
                f"AffectControls.temperature_max {shown(self.temperature_max)}"
            )
        return self


DEFAULT_AFFECT_CONTROLS = AffectControls()


def mood_octant(mood: Mood, *, controls: AffectControls = DEFAULT_AFFECT_CONTROLS) -> str:
    """The PAD octant label, or "neutral" when every component sits inside the deadband.

    Outside the deadband a component of exactly zero counts as positive.
    """
    band = controls.neutral_deadband
    if abs(mood.valence) < band and abs(mood.arousal) < band and abs(mood.dominance) < band:
        return "neutral"
    return _OCTANTS[(mood.valence >= 0, mood.arousal >= 0, mood.dominance >= 0)]


def decoding_params(
    mood: Mood | None, *, controls: AffectControls = DEFAULT_AFFECT_CONTROLS
) -> DecodingParams:
    """Temperature from arousal and a fixed top-p; with no mood, temperature 1 and no top-p."""
    if mood is None:
        return DecodingParams(temperature=controls.temperature_base, top_p=None)
    raw = controls.temperature_base + controls.temperature_arousal_gain * mood.arousal
    temperature = min(controls.temperature_max, max(controls.temperature_min, raw))
    return DecodingParams(temperature=temperature, top_p=controls.top_p)


def length_factor(
    mood: Mood | None, *, controls: AffectControls = DEFAULT_AFFECT_CONTROLS
) -> float:
    """The response-budget factor: shorter replies at low arousal, then at low valence."""
    if mood is None:
        return 1.0
    if mood.arousal < controls.low_arousal_threshold:
        return controls.low_arousal_factor
    if mood.valence < controls.low_valence_threshold:
        return controls.low_valence_factor
    return 1.0


def apply_length_factor(
    base_tokens: int, mood: Mood | None, *, controls: AffectControls = DEFAULT_AFFECT_CONTROLS
) -> int:
    """Scale a positive token budget by the mood's factor, never above the caller's budget.

    The result keeps a floor (180 tokens by default) only where that floor fits the budget.
    """
    try:
        budget = check_int(base_tokens, 1)
    except ValueError as error:
        raise InvalidInputError(f"base_tokens {error}") from None
    factor = length_factor(mood, controls=controls)
    if factor == 1.0:
        return budget
    return min(budget, max(controls.token_floor, round(budget * factor)))


def is_ambivalent(
    emotions: Mapping[str, float] | None, *, controls: AffectControls = DEFAULT_AFFECT_CONTROLS
) -> bool:
    """Whether the strongest positive and negative emotions are both strong and comparable.

    None holds no emotion, so it is not ambivalent (as in the reference).
    """
    emotions = as_emotion_map(emotions, "emotions")
    positive = max((v for k, v in emotions.items() if k in POSITIVE_EMOTIONS), default=0.0)
    negative = max((v for k, v in emotions.items() if k in NEGATIVE_EMOTIONS), default=0.0)
    if positive < controls.ambivalence_floor or negative < controls.ambivalence_floor:
        return False
    if positive == 0.0 or negative == 0.0:  # reachable only with a zero floor: no 0/0 ratio
        return False
    return min(positive, negative) / max(positive, negative) >= controls.ambivalence_ratio
