"""Kernel-function cases: each fixture function's input and output shapes and its call.

A kernel fixture maps group → function → ``[{"in", "out"}]``. Every input is checked against
its shape and turned into kernel values when the file is parsed; only the call itself waits
until the case runs. A recency case without a ``now`` of its own is scored at the run's
instant, taken once from the clock the runner was given.

The module is about 430 lines because ``FUNCTIONS`` is one table of all twenty functions a
fixture may test, each beside its shapes; split, the table could no longer be read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from affect_memory.conformance import values
from affect_memory.conformance.schema import (
    COGNITION_IN,
    EMOTIONS,
    GOALS,
    OCEAN,
    PAD,
    PRESENCE_OUT,
    STATE_FIELDS,
    TURN_OUT,
    Spec,
    anything,
    boolean,
    either,
    fail,
    integer,
    list_of,
    nullable,
    number,
    object_of,
    show,
    string,
)
from affect_memory.conformance.values import flat_state, pad_dict, parse_now, turn_dict, unit
from affect_memory.kernel.affect import (
    apply_length_factor,
    decoding_params,
    is_ambivalent,
    length_factor,
    mood_octant,
)
from affect_memory.kernel.appraisal import (
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
from affect_memory.kernel.bounds import check_int
from affect_memory.kernel.errors import AffectMemoryError, FixtureError
from affect_memory.kernel.models import CognitionState, EmotionMap, Mood
from affect_memory.kernel.retrieval import candidate_score, mood_congruence_factor, recency_weight
from affect_memory.kernel.surfacing import build_presence_vector, clean_text, presence_line

__all__ = [
    "CASE",
    "FUNCTIONS",
    "Case",
    "KernelFunction",
    "Prepare",
    "Thunk",
    "check_meta_count",
    "parse_kernel_cases",
    "prepared",
]

Thunk = Callable[[], Any]
"""One prepared case: calling it runs the kernel and returns the actual output."""

Prepare = Callable[[Any, datetime], Thunk]
"""Turns a checked input into its thunk; the instant is the run's, for cases without a now."""


@dataclass(frozen=True)
class Case:
    """One prepared case or trace step: where it is reported, what it expects, how it runs."""

    category: str
    index: int
    expected: Any
    run: Thunk


def _prepare_recency(data: Mapping[str, Any], now: datetime) -> Thunk:
    """A recency case at its own ``now``, or at the run's (the injected clock's) without one."""
    if "now" in data:
        now = parse_now(data["now"])
    if "days_ago" in data:
        try:
            timestamp: str = (now - timedelta(days=data["days_ago"])).isoformat()
        except OverflowError:
            raise FixtureError(
                f"days_ago {data['days_ago']!r} puts the timestamp outside the datetime range"
            ) from None
    else:
        timestamp = data["timestamp"]
    return lambda: recency_weight(timestamp, now)


def _prepare_candidate_score(data: Mapping[str, Any]) -> Thunk:
    unit(data["distance"], "distance", 0.0, 2.0)
    try:
        check_int(data["recall_count"], 0)
    except ValueError as error:
        raise FixtureError(f"recall_count {error}") from None
    return lambda: candidate_score(
        data["distance"],
        data["days_ago"],
        data["episode"],
        data["significance"],
        data["recall_count"],
    )


def _prepare_decay_mood(data: Mapping[str, Any]) -> Thunk:
    mood, personality = values.mood(data), values.personality(data)
    baseline = unit(data["baseline_valence"], "baseline_valence")
    stage: str | int = data["stage"] if "stage" in data else data["stage_int"]
    return lambda: pad_dict(decay_mood(mood, personality, stage, baseline))


def _prepare_appraise_input(data: Mapping[str, Any]) -> Thunk:
    mood, goals = values.mood(data), values.goals(data)
    baseline = unit(data["baseline_valence"], "baseline_valence")

    def run() -> dict[str, Any]:
        result = appraise_input(mood, goals, data["intent"], baseline)
        return {
            "emotions": result.emotions.to_dict(),
            "mood": pad_dict(result.mood),
            "baseline_valence": result.baseline_valence,
        }

    return run


def _prepare_state_emotions(data: Mapping[str, Any]) -> Thunk:
    mood = Mood(valence=data["valence"], arousal=data["arousal"])
    longing = unit(data["longing"], "longing", 0.0, 1.0)
    return lambda: state_emotions(mood, longing)


def _prepare_appraise_turn(data: Mapping[str, Any]) -> Thunk:
    state = flat_state(data)
    carry = None if data.get("occ_carry") is None else EmotionMap(data["occ_carry"])

    def run() -> dict[str, Any]:
        outcome = appraise_turn(
            state, data["intent"], carry, data.get("expectation"), data.get("message", "")
        )
        return turn_dict(outcome.state, outcome.active_emotions)

    return run


def _prepare_presence_vector(data: Mapping[str, Any]) -> Thunk:
    state = flat_state(data)
    cognition = CognitionState(**data["cognition"]) if data.get("cognition") else None
    return lambda: build_presence_vector(state, cognition)


def _convert_then(convert: Callable[[Any], Any], compute: Callable[[Any], Any]) -> Prepare:
    """Validate and convert at prepare time; compute only when the case runs."""

    def prepare(data: Any, now: datetime) -> Thunk:
        value = convert(data)
        return lambda: compute(value)

    return prepare


def _untimed(prepare: Callable[[Any], Thunk]) -> Prepare:
    """A prepare that needs no clock."""
    return lambda data, now: prepare(data)


def _at(prepare: Prepare, now: datetime) -> Callable[[Any], Thunk]:
    """``prepare`` with the run's instant filled in."""
    return lambda data: prepare(data, now)


def _optional_mood(data: Any) -> Mood | None:
    return None if data is None else values.mood(data)


def _stage_of(data: Mapping[str, Any]) -> Any:
    return data["stage"]


@dataclass(frozen=True)
class KernelFunction:
    """One kernel function a fixture may test: its input and output shapes and how to call it."""

    input_spec: Spec
    output_spec: Spec
    prepare: Prepare


def _decoding_dict(mood: Mood | None) -> dict[str, Any]:
    params = decoding_params(mood)
    return {"temperature": params.temperature, "top_p": params.top_p}


def _prepare_length(data: Mapping[str, Any]) -> Thunk:
    try:
        budget = check_int(data["base_tokens"], 1)
    except ValueError as error:
        raise FixtureError(f"base_tokens {error}") from None
    mood = values.mood(data)
    return lambda: apply_length_factor(budget, mood)


def _prepare_congruence(data: Mapping[str, Any]) -> Thunk:
    memory = unit(data["mem_valence"], "mem_valence")
    mood = unit(data["mood_valence"], "mood_valence")
    return lambda: mood_congruence_factor(memory, mood, data["congruence_on"])


def _prepare_baseline_weight(data: Mapping[str, Any]) -> Thunk:
    return lambda: baseline_weight(data["stage_int"])


def _prepare_clean_text(data: Mapping[str, Any]) -> Thunk:
    return lambda: clean_text(data["value"], data["max_len"])


def _prepare_presence_line(data: Mapping[str, Any]) -> Thunk:
    return lambda: presence_line(
        data["reflection_pending"],
        data["due_intention"],
        data["carried_thought"],
        data["open_thread"],
    )


_STAGE_CHOICE = ({"stage_int": integer}, {"stage": string})

FUNCTIONS: dict[str, dict[str, KernelFunction]] = {
    "affect_control": {
        "mood_octant": KernelFunction(
            object_of(PAD), string, _convert_then(values.mood, mood_octant)
        ),
        "decoding_params": KernelFunction(
            nullable(object_of(PAD)),
            object_of({"temperature": number, "top_p": nullable(number)}),
            _convert_then(_optional_mood, _decoding_dict),
        ),
        "length_factor": KernelFunction(
            nullable(object_of(PAD)), number, _convert_then(_optional_mood, length_factor)
        ),
        "apply_length_factor": KernelFunction(
            object_of({**PAD, "base_tokens": integer}), integer, _untimed(_prepare_length)
        ),
        "is_ambivalent": KernelFunction(
            EMOTIONS, boolean, _convert_then(EmotionMap, is_ambivalent)
        ),
    },
    "retrieval": {
        "recency_weight": KernelFunction(
            either(
                (frozenset({"days_ago"}), object_of({"days_ago": number}, {"now": string})),
                (frozenset({"timestamp"}), object_of({"timestamp": string}, {"now": string})),
            ),
            number,
            _prepare_recency,
        ),
        "mood_congruence_factor": KernelFunction(
            object_of({"mem_valence": number, "mood_valence": number, "congruence_on": boolean}),
            number,
            _untimed(_prepare_congruence),
        ),
        "candidate_score": KernelFunction(
            object_of(
                {
                    "distance": number,
                    "days_ago": number,
                    "episode": boolean,
                    "significance": number,
                    "recall_count": integer,
                }
            ),
            number,
            _untimed(_prepare_candidate_score),
        ),
    },
    "appraisal": {
        "mood_inertia": KernelFunction(
            object_of(OCEAN), number, _convert_then(values.personality, mood_inertia)
        ),
        "stage_int": KernelFunction(
            object_of({"stage": string}), integer, _convert_then(_stage_of, stage_int)
        ),
        "baseline_weight": KernelFunction(
            object_of({"stage_int": integer}), number, _untimed(_prepare_baseline_weight)
        ),
        "decay_mood": KernelFunction(
            either(
                *(
                    (
                        frozenset(choice),
                        object_of({**PAD, **OCEAN, **choice, "baseline_valence": number}),
                    )
                    for choice in _STAGE_CHOICE
                )
            ),
            object_of(PAD),
            _untimed(_prepare_decay_mood),
        ),
        "appraise_input": KernelFunction(
            object_of({**PAD, **GOALS, "intent": string, "baseline_valence": number}),
            object_of({"emotions": EMOTIONS, "mood": object_of(PAD), "baseline_valence": number}),
            _untimed(_prepare_appraise_input),
        ),
        "expectation_emotions": KernelFunction(
            object_of({"expectation": string, "message": string}),
            EMOTIONS,
            _untimed(lambda d: lambda: expectation_emotions(d["expectation"], d["message"])),
        ),
        "occ_carry_decay": KernelFunction(
            EMOTIONS, EMOTIONS, _convert_then(EmotionMap, decay_occ_carry)
        ),
        "state_emotions": KernelFunction(
            object_of({"valence": number, "arousal": number, "longing": number}),
            EMOTIONS,
            _untimed(_prepare_state_emotions),
        ),
        "appraise_turn": KernelFunction(
            object_of(
                {"intent": string},
                {
                    **STATE_FIELDS,
                    "occ_carry": nullable(EMOTIONS),
                    "expectation": nullable(string),
                    "message": string,
                },
            ),
            TURN_OUT,
            _untimed(_prepare_appraise_turn),
        ),
    },
    "surfacing": {
        "clean_text": KernelFunction(
            object_of({"value": anything, "max_len": integer}),
            nullable(string),
            _untimed(_prepare_clean_text),
        ),
        "presence_line": KernelFunction(
            object_of(
                {
                    "reflection_pending": boolean,
                    "due_intention": boolean,
                    "carried_thought": boolean,
                    "open_thread": boolean,
                }
            ),
            string,
            _untimed(_prepare_presence_line),
        ),
        "presence_vector": KernelFunction(
            object_of({}, {**STATE_FIELDS, "cognition": nullable(COGNITION_IN)}),
            PRESENCE_OUT,
            _untimed(_prepare_presence_vector),
        ),
    },
}


CASE = object_of({"in": anything, "out": anything})
"""One case of a kernel function."""


def check_meta_count(payload: Mapping[str, Any], key: str, actual: int) -> None:
    """Refuse a file whose ``_meta.<key>`` count differs from what it holds."""
    meta = payload.get("_meta")
    if not isinstance(meta, dict):
        raise fail("_meta", "missing or not an object")
    if key not in meta:
        raise fail("_meta", f"missing field {key!r}")
    integer(meta[key], f"_meta.{key}")
    if meta[key] != actual:
        raise fail(f"_meta.{key}", f"says {meta[key]} but the file holds {actual}")


def prepared(factory: Callable[[Any], Thunk], data: Any, path: str) -> Thunk:
    """``factory(data)``, with any validation error of the kernel's models named at ``path``."""
    try:
        return factory(data)
    except ValidationError as error:
        detail = error.errors()[0]
        where = ".".join(str(part) for part in detail["loc"])
        message = str(detail["msg"]).removeprefix("Value error, ")
        raise fail(f"{path}.{where}" if where else path, f"{message}") from None
    except (FixtureError, AffectMemoryError) as error:
        raise fail(path, str(error)) from None


def parse_kernel_cases(payload: Mapping[str, Any], now: datetime) -> tuple[Case, ...]:
    """Every case of a kernel fixture, checked and prepared, in file order."""
    unknown = sorted(set(payload) - set(FUNCTIONS) - {"_meta"})
    if unknown:
        raise fail(unknown[0], "unknown group")
    cases: list[Case] = []
    for group, functions in payload.items():
        if group == "_meta":
            continue
        if not isinstance(functions, dict):
            raise fail(group, f"expected an object of functions, got {show(functions)}")
        for name, raw_cases in functions.items():
            if name not in FUNCTIONS[group]:
                raise fail(f"{group}.{name}", "unknown function")
            function = FUNCTIONS[group][name]
            path = f"{group}.{name}"
            list_of(CASE)(raw_cases, path)
            for index, case in enumerate(raw_cases):
                where = f"{path}[{index}]"
                function.input_spec(case["in"], f"{where}.in")
                function.output_spec(case["out"], f"{where}.out")
                run = prepared(_at(function.prepare, now), case["in"], f"{where}.in")
                cases.append(Case(f"{group}/{name}", index, case["out"], run))
    check_meta_count(payload, "cases", len(cases))
    return tuple(cases)
