"""The default conversational appraisal: mood inertia, intent impulses, OCC carry, expectations.

The module is about 600 lines because its parameter models and the pure steps that read them
form one fixture-pinned calculation, ``appraise_turn``; each step sits beside the parameters it
reads, and split over files the order of the calculation could no longer be read in one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, model_validator

from affect_memory.kernel.bounds import (
    FiniteFloat,
    NonNegativeFloat,
    SignedUnit,
    UnitInterval,
    check_int,
    check_number,
)
from affect_memory.kernel.errors import InvalidInputError, UnknownStageError, shown
from affect_memory.kernel.models import (
    AffectState,
    EmotionMap,
    FrozenModel,
    Goals,
    Mood,
    Personality,
    as_emotion_map,
)
from affect_memory.kernel.parameters import Name, ParameterModel, unique

__all__ = [
    "BUILTIN_INTENTS",
    "CUSTOM_INTENT_PATTERN",
    "DEFAULT_AFFECT_DYNAMICS",
    "DEFAULT_EXPECTATION_CUES",
    "DEFAULT_STAGE_LADDER",
    "AffectDynamics",
    "AppraisalOutcome",
    "DefaultAppraisalPolicy",
    "EmotionSignal",
    "ExpectationCues",
    "ImpulseResult",
    "IntentImpulse",
    "StageLadder",
    "appraise_input",
    "appraise_turn",
    "baseline_weight",
    "decay_mood",
    "decay_occ_carry",
    "expectation_emotions",
    "mood_inertia",
    "stage_int",
    "state_emotions",
]

GoalName = Literal["rapport", "intellectual", "autonomy", "respect", "honesty"]
BASE_EMOTIONS = ("joy", "distress", "admiration", "reproach", "gratitude")
"""The emotions every impulse result reports, 0.0 unless the intent raises them."""


class EmotionSignal(ParameterModel):
    """One fresh emotion an intent raises: ``min(1, goal × coefficient)``, or the coefficient."""

    emotion: Name
    coefficient: NonNegativeFloat
    goal: GoalName | None = None

    @model_validator(mode="after")
    def _an_ungated_value_is_an_intensity(self) -> EmotionSignal:
        if self.goal is None and self.coefficient > 1.0:
            raise ValueError(
                f"EmotionSignal.coefficient must be within [0, 1] without a goal (it is the "
                f"emotion's value), got {shown(self.coefficient)}"
            )
        return self


PadChange = Annotated[float, BeforeValidator(lambda value: check_number(value, -2.0, 2.0))]
"""A change of one PAD component: the span between two values in [-1, 1]."""


def _distinct_signals(signals: tuple[EmotionSignal, ...]) -> tuple[EmotionSignal, ...]:
    unique([signal.emotion for signal in signals], "signal emotions")
    return signals


class IntentImpulse(ParameterModel):
    """The PAD change and fresh emotions one intent causes."""

    intent: Name
    valence: PadChange = 0.0
    arousal: PadChange = 0.0
    dominance: PadChange = 0.0
    signals: Annotated[tuple[EmotionSignal, ...], AfterValidator(_distinct_signals)] = ()
    widens: bool = False
    """Ambiguous intents widen an already-polarized valence rather than carry a sign."""


def _signal(emotion: str, coefficient: float, goal: GoalName | None = None) -> EmotionSignal:
    return EmotionSignal(emotion=emotion, coefficient=coefficient, goal=goal)


DEFAULT_INTENT_IMPULSES: tuple[IntentImpulse, ...] = (
    IntentImpulse(
        intent="ABUSE",
        valence=-0.35,
        arousal=-0.10,
        dominance=0.25,
        signals=(_signal("reproach", 0.95, "respect"), _signal("distress", 0.65, "rapport")),
    ),
    IntentImpulse(
        intent="APOLOGY",
        valence=0.05,
        widens=True,
        signals=(_signal("joy", 0.20, "rapport"), _signal("gratitude", 0.35, "honesty")),
    ),
    IntentImpulse(
        intent="VULNERABILITY",
        valence=0.15,
        arousal=0.10,
        signals=(_signal("gratitude", 0.70, "honesty"), _signal("joy", 0.75, "rapport")),
    ),
    IntentImpulse(
        intent="CURIOSITY",
        valence=0.20,
        arousal=0.15,
        dominance=0.05,
        widens=True,
        signals=(_signal("admiration", 0.75, "intellectual"), _signal("joy", 0.50, "rapport")),
    ),
    IntentImpulse(
        intent="CHALLENGE",
        valence=-0.05,
        dominance=0.10,
        widens=True,
        signals=(_signal("admiration", 0.45, "intellectual"), _signal("distress", 0.25, "rapport")),
    ),
    IntentImpulse(
        intent="NEGLECT",
        valence=-0.10,
        arousal=-0.05,
        signals=(_signal("distress", 0.40, "rapport"),),
    ),
    IntentImpulse(intent="CASUAL", valence=0.02, widens=True, signals=(_signal("joy", 0.05),)),
)

BUILTIN_INTENTS = tuple(impulse.intent for impulse in DEFAULT_INTENT_IMPULSES)
"""The seven intents of the reference policy."""

CUSTOM_INTENT_PATTERN = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
"""What a custom intent label must match in full: an upper-case letter, then up to 63
upper-case letters, digits or ``_`` (the engine and the gate share this rule)."""

DEFAULT_CARRY_DECAY = (
    ("reproach", 0.70),
    ("distress", 0.80),
    ("admiration", 0.85),
    ("gratitude", 0.88),
    ("joy", 0.90),
)


def _distinct_impulses(impulses: tuple[IntentImpulse, ...]) -> tuple[IntentImpulse, ...]:
    unique([impulse.intent for impulse in impulses], "impulse intents")
    return impulses


def _distinct_rates(rates: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    unique([name for name, _ in rates], "carry-decay emotion names")
    return rates


class AffectDynamics(ParameterModel):
    """Caller-owned constants of mood inertia, impulses, widening, baseline drift and carry."""

    inertia_base: UnitInterval = 0.80
    inertia_neuroticism_gain: FiniteFloat = 0.20
    inertia_extraversion_gain: FiniteFloat = 0.10
    inertia_min: UnitInterval = 0.62
    inertia_max: UnitInterval = 0.92
    rest_dominance: SignedUnit = 0.10
    """Resting dominance per unit of stage weight (a weight in [0, 1] keeps it a PAD value)."""
    impulses: Annotated[tuple[IntentImpulse, ...], AfterValidator(_distinct_impulses)] = (
        DEFAULT_INTENT_IMPULSES
    )
    widen_threshold: UnitInterval = 0.20
    widen_negative: NonNegativeFloat = 1.10
    widen_positive: NonNegativeFloat = 1.04
    baseline_retention: UnitInterval = 0.98
    baseline_gain: UnitInterval = 0.02
    carry_decay: Annotated[
        tuple[tuple[Name, UnitInterval], ...], AfterValidator(_distinct_rates)
    ] = DEFAULT_CARRY_DECAY
    carry_decay_default: UnitInterval = 0.80
    carry_floor: UnitInterval = 0.05
    """Carried values at or below this are dropped."""
    longing_threshold: UnitInterval = 0.3
    unease_floor: SignedUnit = -0.3
    unease_cap: UnitInterval = 0.3

    @model_validator(mode="after")
    def _inertia_range(self) -> AffectDynamics:
        if self.inertia_min > self.inertia_max:
            raise ValueError(
                f"AffectDynamics.inertia_min {shown(self.inertia_min)} must not be above "
                f"AffectDynamics.inertia_max {shown(self.inertia_max)}"
            )
        return self

    def impulse(self, intent: str) -> IntentImpulse | None:
        """The impulse for an exact intent label, or None."""
        return _impulse_index(self.impulses).get(intent)

    def decay_rate(self, emotion: str) -> float:
        """The per-turn carry decay of one emotion."""
        return dict(self.carry_decay).get(emotion, self.carry_decay_default)


@lru_cache(maxsize=32)
def _impulse_index(impulses: tuple[IntentImpulse, ...]) -> dict[str, IntentImpulse]:
    return {impulse.intent: impulse for impulse in impulses}


DEFAULT_AFFECT_DYNAMICS = AffectDynamics()


def _stage_names(stages: tuple[str, ...]) -> tuple[str, ...]:
    if not stages:
        raise ValueError(f"must hold at least one stage, got {shown(stages)}")
    unique(stages, "stage names")
    return stages


class StageLadder(ParameterModel):
    """Relationship stages in order, with the resting-point weight of each."""

    stages: Annotated[tuple[Name, ...], AfterValidator(_stage_names)] = (
        "stranger",
        "acquaintance",
        "friend",
        "close",
        "intimate",
    )
    weights: tuple[UnitInterval, ...] = (0.0, 0.20, 0.40, 0.60, 0.70)
    strict: bool = False
    """When set, an unknown label raises instead of behaving like the first stage."""

    @model_validator(mode="after")
    def _one_weight_per_stage(self) -> StageLadder:
        if len(self.stages) != len(self.weights):
            raise ValueError(
                f"StageLadder.weights needs one weight per stage ({len(self.stages)}), "
                f"got {shown(self.weights)}"
            )
        return self


DEFAULT_STAGE_LADDER = StageLadder()


def _cue(value: str) -> str:
    if not value.strip().strip("-").strip():
        raise ValueError(f"must hold a word, not only whitespace or '-', got {shown(value)}")
    return value


Cue = Annotated[str, AfterValidator(_cue)]


def _distinct_cues(cues: tuple[str, ...]) -> tuple[str, ...]:
    unique([cue.lower() for cue in cues], "cues (ignoring case)")
    return cues


CueList = Annotated[tuple[Cue, ...], AfterValidator(_distinct_cues)]
"""Cue words or phrases, each holding a word, unique ignoring case; empty switches a rule off."""


class ExpectationCues(ParameterModel):
    """English cue words for expectation appraisal; a cue ending in '-' is a stem."""

    negative_expected: CueList = (
        "angry",
        "upset",
        "bad",
        "worse",
        "argument",
        "hurt",
        "afraid",
        "scared",
    )
    positive_current: CueList = (
        "better",
        "okay",
        "ok",
        "good",
        "fine",
        "resolved",
        "worked out",
    )
    negative_current: CueList = (
        "worse",
        "bad",
        "angry",
        "upset",
        "failed",
        "awful",
        "hurt",
    )
    expected_resolution: CueList = ("come back", "tell", "answer", "resolve", "apolog-")
    relief: UnitInterval = 0.45
    surprise: UnitInterval = 0.35
    disappointment: UnitInterval = 0.4
    satisfaction: UnitInterval = 0.4


DEFAULT_EXPECTATION_CUES = ExpectationCues()


class ImpulseResult(FrozenModel):
    """What one intent does to a mood: fresh emotions, the new mood and baseline."""

    emotions: EmotionMap
    mood: Mood
    baseline_valence: SignedUnit


class AppraisalOutcome(FrozenModel):
    """The result of appraising one turn: the next state and the turn's active emotions."""

    state: AffectState
    active_emotions: EmotionMap
    intent: str


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


def mood_inertia(
    personality: Personality, *, dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS
) -> float:
    """How much of the current mood survives a turn: more for neurotic, less for extraverted."""
    raw = (
        dynamics.inertia_base
        + dynamics.inertia_neuroticism_gain * (personality.neuroticism - 0.5)
        - dynamics.inertia_extraversion_gain * (personality.extraversion - 0.5)
    )
    return _clamp(raw, dynamics.inertia_min, dynamics.inertia_max)


def stage_int(stage: str, *, ladder: StageLadder = DEFAULT_STAGE_LADDER) -> int:
    """The 1-based ordinal of a stage label; unknown labels are 1 unless the ladder is strict."""
    if not isinstance(stage, str):
        raise InvalidInputError(f"stage must be a string, got {stage!r}")
    if stage in ladder.stages:
        return ladder.stages.index(stage) + 1
    if ladder.strict:
        raise UnknownStageError(f"stage {stage!r} is not on the ladder {list(ladder.stages)}")
    return 1


def baseline_weight(stage: int, *, ladder: StageLadder = DEFAULT_STAGE_LADDER) -> float:
    """The resting-point weight of a stage ordinal; 0.0 outside the ladder."""
    try:
        ordinal = check_int(stage)
    except ValueError as error:
        raise InvalidInputError(f"stage ordinal {error}") from None
    if 1 <= ordinal <= len(ladder.weights):
        return ladder.weights[ordinal - 1]
    return 0.0


def decay_mood(
    mood: Mood,
    personality: Personality,
    stage: str | int,
    baseline_valence: float,
    *,
    dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS,
    ladder: StageLadder = DEFAULT_STAGE_LADDER,
) -> Mood:
    """Pull the mood toward the stage's resting point by the personality's inertia."""
    ordinal = stage_int(stage, ladder=ladder) if isinstance(stage, str) else stage
    weight = baseline_weight(ordinal, ladder=ladder)
    phi = mood_inertia(personality, dynamics=dynamics)
    rest = (weight * baseline_valence, 0.0, weight * dynamics.rest_dominance)
    current = (mood.valence, mood.arousal, mood.dominance)
    valence, arousal, dominance = (
        round(_clamp(r + phi * (c - r), -1.0, 1.0), 4) for r, c in zip(rest, current, strict=True)
    )
    return Mood(valence=valence, arousal=arousal, dominance=dominance)


def _shift(value: float, change: float) -> float:
    if change > 0:
        return min(1.0, value + change)
    if change < 0:
        return max(-1.0, value + change)
    return value


def appraise_input(
    mood: Mood,
    goals: Goals,
    intent: str,
    baseline_valence: float,
    *,
    dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS,
) -> ImpulseResult:
    """Apply one intent's impulse to a mood and drift the slow baseline toward the result.

    Intents match exactly; an unknown intent leaves mood and emotions unchanged.
    """
    emotions = dict.fromkeys(BASE_EMOTIONS, 0.0)
    valence, arousal, dominance = mood.valence, mood.arousal, mood.dominance
    impulse = dynamics.impulse(intent)
    if impulse is not None:
        for signal in impulse.signals:
            if signal.goal is None:
                emotions[signal.emotion] = signal.coefficient
            else:
                emotions[signal.emotion] = min(
                    1.0, getattr(goals, signal.goal) * signal.coefficient
                )
        valence = _shift(valence, impulse.valence)
        arousal = _shift(arousal, impulse.arousal)
        dominance = _shift(dominance, impulse.dominance)
        if impulse.widens and abs(valence) >= dynamics.widen_threshold:
            scale = dynamics.widen_negative if valence < 0 else dynamics.widen_positive
            valence = round(_clamp(valence * scale, -1.0, 1.0), 4)
    baseline = round(
        _clamp(
            dynamics.baseline_retention * baseline_valence + dynamics.baseline_gain * valence,
            -1.0,
            1.0,
        ),
        4,
    )
    return ImpulseResult(
        emotions=EmotionMap(emotions),
        mood=Mood(valence=valence, arousal=arousal, dominance=dominance),
        baseline_valence=baseline,
    )


@lru_cache(maxsize=256)
def _cue_pattern(cues: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = [
        rf"\b{re.escape(cue[:-1])}" if cue.endswith("-") else rf"\b{re.escape(cue)}\b"
        for cue in cues
        if cue.strip("-")
    ]
    return re.compile("|".join(parts)) if parts else None


def _mentions(text: str, cues: tuple[str, ...]) -> bool:
    pattern = _cue_pattern(tuple(cue.lower() for cue in cues))
    return pattern is not None and pattern.search(text) is not None


def expectation_emotions(
    expectation: str | None,
    message: str | None,
    *,
    cues: ExpectationCues = DEFAULT_EXPECTATION_CUES,
) -> dict[str, float]:
    """Emotions from how a message meets what was expected: relief, disappointment, satisfaction.

    Cues match as whole words with Unicode word boundaries; the first rule that holds wins.
    None counts as empty: no expectation (or no message) raises nothing.
    """
    for argument, text in (("expectation", expectation), ("message", message)):
        if text is not None and not isinstance(text, str):
            raise InvalidInputError(f"{argument} must be a string or None, got {shown(text)}")
    expected, current = (expectation or "").lower(), (message or "").lower()
    if not expected or not current:
        return {}
    if _mentions(expected, cues.negative_expected) and _mentions(current, cues.positive_current):
        return {"relief": cues.relief, "surprise": cues.surprise}
    if _mentions(expected, cues.expected_resolution):
        if _mentions(current, cues.negative_current):
            return {"disappointment": cues.disappointment}
        if _mentions(current, cues.positive_current):
            return {"satisfaction": cues.satisfaction}
    return {}


def decay_occ_carry(
    carry: Mapping[str, float] | None, *, dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS
) -> dict[str, float]:
    """Decay each carried emotion by its rate, dropping what falls to the floor or below.

    None carries nothing, so it decays to ``{}`` (as in the reference).
    """
    decayed: dict[str, float] = {}
    for name, value in as_emotion_map(carry, "carry").items():
        kept = value * dynamics.decay_rate(name)
        if kept > dynamics.carry_floor:
            decayed[name] = kept
    return decayed


def state_emotions(
    mood: Mood, longing: float, *, dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS
) -> dict[str, float]:
    """Emotions that follow from the state itself: fatigue, longing, mild unease."""
    emotions: dict[str, float] = {}
    if mood.arousal < 0:
        emotions["fatigue"] = round(min(1.0, -mood.arousal), 3)
    if longing > dynamics.longing_threshold:
        emotions["longing"] = round(longing, 3)
    if dynamics.unease_floor < mood.valence < 0:
        emotions["unease"] = round(min(dynamics.unease_cap, -mood.valence), 3)
    return emotions


def _merge_max(fresh: Mapping[str, float], carried: Mapping[str, float]) -> dict[str, float]:
    """The maximum of both maps over the union of their names (fresh zeros stay present)."""
    merged = dict(fresh)
    for name, value in carried.items():
        if name not in merged or value > merged[name]:
            merged[name] = value
    return merged


def _fold_larger(into: dict[str, float], other: Mapping[str, float]) -> None:
    """Fold ``other`` in where it is larger, a missing name counting as 0 (so 0.0 adds nothing)."""
    for name, value in other.items():
        if value > into.get(name, 0.0):
            into[name] = value


def appraise_turn(
    state: AffectState,
    intent: str,
    occ_carry: Mapping[str, float] | None = None,
    expectation: str | None = None,
    message: str = "",
    *,
    dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS,
    ladder: StageLadder = DEFAULT_STAGE_LADDER,
    cues: ExpectationCues = DEFAULT_EXPECTATION_CUES,
) -> AppraisalOutcome:
    """Appraise one turn: decay, impulse, carry, state and expectation emotions, max-merged."""
    decayed = decay_mood(
        state.mood,
        state.personality,
        state.relationship.stage,
        state.baseline_valence,
        dynamics=dynamics,
        ladder=ladder,
    )
    impulse = appraise_input(
        decayed, state.goals, intent, state.baseline_valence, dynamics=dynamics
    )
    carried = decay_occ_carry(
        state.occ_carry if occ_carry is None else occ_carry, dynamics=dynamics
    )
    merged = _merge_max(impulse.emotions, carried)
    _fold_larger(merged, state_emotions(impulse.mood, state.attachment.longing, dynamics=dynamics))
    # Only a missing expectation (None) falls back to the state's; "" means none, as in the
    # reference.
    expected = state.expectation if expectation is None else expectation
    _fold_larger(merged, expectation_emotions(expected or "", message, cues=cues))
    next_carry = {name: value for name, value in merged.items() if value > dynamics.carry_floor}
    next_state = state.model_copy(
        update={
            "mood": impulse.mood,
            "baseline_valence": impulse.baseline_valence,
            "occ_carry": EmotionMap(next_carry),
        }
    )
    return AppraisalOutcome(state=next_state, active_emotions=EmotionMap(merged), intent=intent)


class DefaultAppraisalPolicy(ParameterModel):
    """The reference appraisal policy: ``appraise_turn`` with caller-owned parameters."""

    dynamics: AffectDynamics = DEFAULT_AFFECT_DYNAMICS
    ladder: StageLadder = DEFAULT_STAGE_LADDER
    cues: ExpectationCues = DEFAULT_EXPECTATION_CUES
    name: Name = "default"

    def appraise(self, state: AffectState, intent: str, message: str) -> AppraisalOutcome:
        """Appraise one turn of ``state`` under ``intent`` and ``message``."""
        return appraise_turn(
            state,
            intent,
            message=message,
            dynamics=self.dynamics,
            ladder=self.ladder,
            cues=self.cues,
        )
