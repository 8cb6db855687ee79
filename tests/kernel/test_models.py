"""Value types: strict validation naming the field, immutability, round-trips and hashing."""

from __future__ import annotations

import inspect
import math
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from pydantic import BaseModel, ValidationError

from affect_memory import kernel
from affect_memory.kernel import (
    AffectControls,
    AffectDynamics,
    AffectState,
    AttachmentState,
    CognitionState,
    DecodingParams,
    EmotionMap,
    EvidenceLimits,
    ExpectationCues,
    Goals,
    MemoryCandidate,
    Mood,
    Personality,
    PromptWording,
    RelationshipState,
    RetrievalWeights,
    ScoredCandidate,
    StageLadder,
    UntrustedContext,
    appraise_turn,
    rank_candidates,
)
from affect_memory.kernel.models import FrozenModel
from tests.kernel.strategies import PROPERTY, affect_states, candidates

NOT_NUMBERS: list[Any] = [True, False, "0.5", None, [0.5], {"v": 0.5}]
NOT_FINITE: list[Any] = [math.nan, math.inf, -math.inf]

# (model, field, a value outside its domain, extra required fields)
BOUNDED: list[tuple[type[BaseModel], str, float, dict[str, Any]]] = [
    (Mood, "valence", 1.0001, {}),
    (Mood, "arousal", -1.0001, {}),
    (Mood, "dominance", 2.0, {}),
    (Personality, "openness", -0.1, {}),
    (Personality, "conscientiousness", 1.1, {}),
    (Personality, "extraversion", 1.5, {}),
    (Personality, "agreeableness", -0.0001, {}),
    (Personality, "neuroticism", 1.0001, {}),
    (Goals, "rapport", 1.01, {}),
    (Goals, "intellectual", -0.01, {}),
    (Goals, "autonomy", 2.0, {}),
    (Goals, "respect", -1.0, {}),
    (Goals, "honesty", 1.5, {}),
    (RelationshipState, "trust_score", 1.2, {}),
    (RelationshipState, "comfort", -0.2, {}),
    (AttachmentState, "longing", 1.0001, {}),
    (AffectState, "baseline_valence", -1.5, {}),
    (MemoryCandidate, "distance", 2.0001, {"id": "m", "text": ""}),
    (MemoryCandidate, "significance", 1.5, {"id": "m", "text": "", "distance": 0.1}),
    (MemoryCandidate, "emotional_valence", -1.5, {"id": "m", "text": "", "distance": 0.1}),
    (MemoryCandidate, "recall_count", -1, {"id": "m", "text": "", "distance": 0.1}),
    (DecodingParams, "top_p", 1.5, {"temperature": 1.0}),
    (DecodingParams, "temperature", -0.1, {"top_p": None}),
    (AffectControls, "top_p", 1.01, {}),
    (AffectControls, "token_floor", 0, {}),
    (AffectControls, "ambivalence_ratio", 1.5, {}),
    (RetrievalWeights, "significance_weight", -0.01, {}),
    (RetrievalWeights, "episode_bonus", -1.0, {}),
    (AffectDynamics, "carry_floor", -0.05, {}),
    (AffectDynamics, "unease_cap", 1.5, {}),
    (ExpectationCues, "relief", 1.5, {}),
    (EvidenceLimits, "per_item", -1, {}),
    (EvidenceLimits, "total", -1, {}),
]

NUMBER_FIELDS = sorted(
    {(model, field, tuple(extra.items())) for model, field, _, extra in BOUNDED}
    | {
        (AffectDynamics, "inertia_base", ()),
        (PromptWording, "emotion_threshold", ()),
        (RetrievalWeights, "recency_floor", ()),
        (AffectControls, "temperature_arousal_gain", ()),
    },
    key=lambda item: (item[0].__name__, item[1]),
)


def _label(item: tuple[type[BaseModel], str, Any]) -> str:
    return f"{item[0].__name__}.{item[1]}"


def _field_named(error: ValidationError, field: str) -> bool:
    return any(field in ".".join(map(str, detail["loc"])) for detail in error.errors())


@pytest.mark.parametrize("model, field, bad, extra", BOUNDED, ids=[_label(b) for b in BOUNDED])
def test_out_of_domain_values_raise_naming_the_field(
    model: type[BaseModel], field: str, bad: float, extra: dict[str, Any]
) -> None:
    kwargs = {"distance": 0.1, **extra} if model is MemoryCandidate else dict(extra)
    with pytest.raises(ValidationError) as caught:
        model(**{**kwargs, field: bad})
    assert _field_named(caught.value, field)
    assert field in str(caught.value)


REFUSALS = [
    (model, field, extra, bad)
    for model, field, extra in NUMBER_FIELDS
    for bad in NOT_NUMBERS + NOT_FINITE
    # None is DecodingParams.top_p's documented "no override".
    if not (model is DecodingParams and field == "top_p" and bad is None)
]


@pytest.mark.parametrize(
    "model, field, extra, bad",
    REFUSALS,
    ids=[f"{_label(r)}={r[3]!r}" for r in REFUSALS],
)
def test_number_fields_refuse_bool_text_nan_and_infinity(
    model: type[BaseModel], field: str, extra: tuple[tuple[str, Any], ...], bad: Any
) -> None:
    kwargs = dict(extra)
    if model is MemoryCandidate:
        kwargs = {"id": "m", "text": "", "distance": 0.1, **kwargs}
    with pytest.raises(ValidationError) as caught:
        model(**{**kwargs, field: bad})
    assert _field_named(caught.value, field)


@pytest.mark.parametrize(
    "model, kwargs",
    [
        (Mood, {}),
        (Personality, {}),
        (Goals, {}),
        (RelationshipState, {}),
        (AttachmentState, {}),
        (AffectState, {}),
        (CognitionState, {}),
        (MemoryCandidate, {"id": "m", "text": "", "distance": 0.1}),
        (DecodingParams, {"temperature": 1.0, "top_p": None}),
        (UntrustedContext, {}),
        (RetrievalWeights, {}),
        (AffectControls, {}),
        (AffectDynamics, {}),
        (StageLadder, {}),
        (ExpectationCues, {}),
        (EvidenceLimits, {}),
        (PromptWording, {}),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
def test_every_model_is_frozen_and_closed(model: type[BaseModel], kwargs: dict[str, Any]) -> None:
    value = model(**kwargs)
    name = next(iter(type(value).model_fields))
    with pytest.raises((ValidationError, TypeError, AttributeError)):
        setattr(value, name, getattr(value, name))
    with pytest.raises(ValidationError) as caught:
        model(**kwargs, surplus_field=1)
    assert "surplus_field" in str(caught.value)


@pytest.mark.parametrize(
    "field",
    [
        "reflection_pending",
        "due_intention",
        "open_thread",
        "intentionality",
        "curiosity",
        "carried_thought",
    ],
)
@pytest.mark.parametrize("bad", [1, 0, "true", None, 1.0])
def test_cognition_flags_are_strict_booleans(field: str, bad: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        CognitionState(**{field: bad})
    assert _field_named(caught.value, field)


def test_memory_candidate_requires_its_text() -> None:
    with pytest.raises(ValidationError) as caught:
        MemoryCandidate(id="m", distance=0.1)  # type: ignore[call-arg]
    assert _field_named(caught.value, "text")
    assert MemoryCandidate(id="m", text="", distance=0.1).text == ""


def test_memory_candidate_significance_defaults_to_a_neutral_half() -> None:
    assert MemoryCandidate(id="m", text="t", distance=0.1).significance == 0.5
    # The default matters to the order: an unrated memory outranks one rated below neutral.
    unrated = MemoryCandidate(id="b-unrated", text="t", distance=0.5)
    rated_low = MemoryCandidate(id="a-rated", text="t", distance=0.5, significance=0.2)
    ranked = rank_candidates([rated_low, unrated], datetime(2026, 1, 1, tzinfo=UTC), limit=2)
    assert [item.candidate.id for item in ranked] == ["b-unrated", "a-rated"]


def test_candidate_episode_is_a_strict_boolean() -> None:
    with pytest.raises(ValidationError, match="episode"):
        MemoryCandidate(id="m", text="", distance=0.1, episode=1)


@pytest.mark.parametrize("bad", [1.0, 2.5, True])
def test_recall_count_is_an_integer(bad: Any) -> None:
    with pytest.raises(ValidationError, match="recall_count"):
        MemoryCandidate(id="m", text="", distance=0.1, recall_count=bad)


@pytest.mark.parametrize(
    "timestamp",
    ["2026-01-01T00:00:00", "2026-01-01", "yesterday", ""],
)
def test_candidate_timestamps_must_be_zoned_iso(timestamp: str) -> None:
    with pytest.raises(ValidationError, match="timestamp"):
        MemoryCandidate(id="m", text="", distance=0.1, timestamp=timestamp)


@pytest.mark.parametrize(
    "timestamp", ["2026-01-01T00:00:00Z", "2026-01-01T05:30:00+05:30", "2026-01-01T00:00:00-08:00"]
)
def test_candidate_accepts_zoned_timestamps(timestamp: str) -> None:
    candidate = MemoryCandidate(id="m", text="", distance=0.1, timestamp=timestamp)
    assert candidate.timestamp == timestamp


def test_candidate_id_must_be_a_nonempty_string() -> None:
    for bad in ["", 5, None]:
        with pytest.raises(ValidationError, match="id"):
            MemoryCandidate(id=bad, text="", distance=0.1)


def test_text_limits_are_4096_characters() -> None:
    MemoryCandidate(id="m", distance=0.1, text="x" * 4096)
    with pytest.raises(ValidationError, match="text"):
        MemoryCandidate(id="m", distance=0.1, text="x" * 4097)
    AffectState(carried_thought="x" * 4096, expectation="y" * 4096)
    with pytest.raises(ValidationError, match="carried_thought"):
        AffectState(carried_thought="x" * 4097)
    with pytest.raises(ValidationError, match="expectation"):
        AffectState(expectation="x" * 4097)


def test_stage_is_a_nonempty_string_of_at_most_64_characters() -> None:
    RelationshipState(stage="s" * 64)
    for bad in ["", "s" * 65, 3, None]:
        with pytest.raises(ValidationError, match="stage"):
            RelationshipState(stage=bad)


# --- EmotionMap -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [True, math.nan, math.inf, -0.1, 1.1, "0.5", None])
def test_emotion_map_refuses_bad_intensities_naming_the_emotion(bad: Any) -> None:
    with pytest.raises(ValueError, match="'joy'"):
        EmotionMap({"joy": bad})
    with pytest.raises(ValidationError, match="occ_carry"):
        AffectState(occ_carry={"joy": bad})


@pytest.mark.parametrize("name", ["", "n" * 65, 3, None])
def test_emotion_map_refuses_bad_names(name: Any) -> None:
    with pytest.raises(ValueError, match="emotion names"):
        EmotionMap({name: 0.5})


def test_emotion_map_is_an_immutable_hashable_mapping() -> None:
    values = {"joy": 0.5, "fear": 0.2}
    emotions = EmotionMap(values)
    values["joy"] = 0.9
    assert emotions["joy"] == 0.5
    with pytest.raises(AttributeError):
        emotions.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        emotions["joy"] = 0.1  # type: ignore[index]
    assert emotions == {"fear": 0.2, "joy": 0.5}
    assert hash(emotions) == hash(EmotionMap({"fear": 0.2, "joy": 0.5}))
    copy = emotions.to_dict()
    copy["joy"] = 0.0
    assert emotions["joy"] == 0.5


# --- round trips and hashing -------------------------------------------------------------------

EXAMPLES: list[BaseModel] = [
    Mood(valence=0.25, arousal=-0.5, dominance=1.0),
    Personality(openness=0.1, neuroticism=0.9),
    Goals(rapport=0.3),
    RelationshipState(stage="close", trust_score=0.7, comfort=0.2),
    AttachmentState(longing=0.45),
    AffectState(
        mood=Mood(valence=-0.3),
        occ_carry=EmotionMap({"joy": 0.4, "reproach": 0.06}),
        carried_thought="a thread ✓",
        expectation="tell me",
        relationship=RelationshipState(stage="friend"),
    ),
    CognitionState(reflection_pending=True, curiosity=True),
    MemoryCandidate(
        id="m-é",
        text="we talked",
        distance=0.3,
        timestamp="2026-01-01T00:00:00+05:30",
        significance=0.5,
        recall_count=3,
        episode=True,
        emotional_valence=-0.2,
    ),
    DecodingParams(temperature=0.9, top_p=0.97),
    DecodingParams(temperature=1.0, top_p=None),
    UntrustedContext(memory_texts=("a", "b"), carried_thought="t"),
    RetrievalWeights(significance_weight=0.5),
    AffectControls(token_floor=100),
    AffectDynamics(carry_floor=0.1),
    StageLadder(strict=True),
    ExpectationCues(relief=0.5),
    EvidenceLimits(per_item=10),
    PromptWording(base="Hi."),
]


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
def test_every_value_round_trips_through_json_and_pickle(value: BaseModel) -> None:
    model = type(value)
    assert model.model_validate_json(value.model_dump_json()) == value
    assert model.model_validate(value.model_dump()) == value
    assert pickle.loads(pickle.dumps(value)) == value


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
def test_equal_values_hash_equal(value: BaseModel) -> None:
    twin = type(value).model_validate_json(value.model_dump_json())
    assert twin is not value
    assert hash(twin) == hash(value)


def test_outcome_types_round_trip() -> None:
    outcome = appraise_turn(AffectState(occ_carry=EmotionMap({"joy": 0.5})), "CURIOSITY")
    assert type(outcome).model_validate_json(outcome.model_dump_json()) == outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome
    scored = ScoredCandidate(
        candidate=MemoryCandidate(id="m", text="", distance=0.2),
        score=0.5,
        similarity=0.9,
        recency=0.7,
        salience=1.0,
        congruence=1.0,
        episode_bonus=0.0,
    )
    assert ScoredCandidate.model_validate_json(scored.model_dump_json()) == scored
    assert pickle.loads(pickle.dumps(EmotionMap({"a": 0.1}))) == EmotionMap({"a": 0.1})


@given(affect_states())
@PROPERTY
def test_any_affect_state_round_trips(state: AffectState) -> None:
    assert AffectState.model_validate_json(state.model_dump_json()) == state
    restored = pickle.loads(pickle.dumps(state))
    assert restored == state
    assert hash(restored) == hash(state)


@given(candidates())
@PROPERTY
def test_any_candidate_round_trips(candidate: MemoryCandidate) -> None:
    assert MemoryCandidate.model_validate_json(candidate.model_dump_json()) == candidate
    assert pickle.loads(pickle.dumps(candidate)) == candidate


_KERNEL_VALUE_MODULES = {
    "affect_memory.kernel.models",
    "affect_memory.kernel.affect",
    "affect_memory.kernel.appraisal",
    "affect_memory.kernel.retrieval",
    "affect_memory.kernel.surfacing",
    "affect_memory.kernel.prompt",
}
_REQUIRED: dict[str, dict[str, Any]] = {
    "MemoryCandidate": {"id": "m", "text": "", "distance": 0.1},
    "DecodingParams": {"temperature": 1.0, "top_p": 0.5},
    "ScoredCandidate": {
        "candidate": MemoryCandidate(id="m", text="", distance=0.1),
        "score": 0.5,
        "similarity": 0.5,
        "recency": 0.5,
        "salience": 1.0,
        "congruence": 1.0,
        "episode_bonus": 0.0,
    },
    "ImpulseResult": {"emotions": {}, "mood": Mood(), "baseline_valence": 0.0},
    "AppraisalOutcome": {"state": AffectState(), "active_emotions": {}, "intent": "X"},
    "EmotionSignal": {"emotion": "joy", "coefficient": 0.5},
    "IntentImpulse": {"intent": "X"},
}


def _number_fields() -> list[tuple[type[BaseModel], str]]:
    found = []
    for name in kernel.__all__:
        model = getattr(kernel, name)
        if not (inspect.isclass(model) and issubclass(model, FrozenModel)):
            continue
        if model.__module__ not in _KERNEL_VALUE_MODULES:
            continue
        example = model(**_REQUIRED.get(name, {}))
        for field in type(example).model_fields:
            value = getattr(example, field)
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.append((model, field))
    return found


NUMBER_FIELDS_EVERYWHERE = _number_fields()


@pytest.mark.parametrize(
    "model, field",
    NUMBER_FIELDS_EVERYWHERE,
    ids=[f"{m.__name__}.{f}" for m, f in NUMBER_FIELDS_EVERYWHERE],
)
def test_no_number_field_of_any_kernel_value_accepts_bool_nan_inf_or_text(
    model: type[BaseModel], field: str
) -> None:
    # Found by enumeration, so a number field added later without validation fails here.
    base = _REQUIRED.get(model.__name__, {})
    for bad in (True, math.nan, math.inf, "1"):
        with pytest.raises(ValidationError) as caught:
            model(**{**base, field: bad})
        assert _field_named(caught.value, field)


def test_the_enumeration_found_the_parameter_objects() -> None:
    names = {f"{m.__name__}.{f}" for m, f in NUMBER_FIELDS_EVERYWHERE}
    assert {"RetrievalWeights.recency_floor", "AffectControls.token_floor", "Mood.valence"} <= names
    assert len(names) > 60
