"""Reference-fixture conformance: validate fixture payloads, run them through the kernel, report.

Pure: callers parse JSON and print; this module only checks shapes and compares results.
A kernel fixture maps group → function → ``[{"in", "out"}]``; a trace fixture holds ``traces``
of steps applied in order with the default appraisal policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from kernel.affect import (
    apply_length_factor,
    decoding_params,
    is_ambivalent,
    length_factor,
    mood_octant,
)
from kernel.appraisal import (
    DEFAULT_STAGE_LADDER,
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
from kernel.bounds import check_int, check_number
from kernel.errors import AffectMemoryError, FixtureError
from kernel.models import (
    AffectState,
    AttachmentState,
    CognitionState,
    EmotionMap,
    Goals,
    Mood,
    Personality,
    RelationshipState,
)
from kernel.retrieval import candidate_score, mood_congruence_factor, recency_weight
from kernel.surfacing import build_presence_vector, clean_text, presence_line

__all__ = [
    "FLOAT_TOLERANCE",
    "CaseFailure",
    "CategoryReport",
    "ConformanceReport",
    "Fixture",
    "parse_fixture",
    "run_fixtures",
]

FLOAT_TOLERANCE = 1e-9
"""Absolute tolerance for fixture floats; strings, booleans, integers and key sets match exactly."""

# --- a small shape language for JSON values ---------------------------------------------------

Spec = Callable[[Any, str], None]


def _fail(path: str, problem: str) -> FixtureError:
    return FixtureError(f"{path}: {problem}")


def _number(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, f"expected a number, got {_show(value)}")
    if not math.isfinite(value):
        raise _fail(path, f"expected a finite number, got {value!r}")


def _integer(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, got {_show(value)}")


def _boolean(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _fail(path, f"expected true or false, got {_show(value)}")


def _string(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, got {_show(value)}")


def _anything(value: Any, path: str) -> None:
    return None


def _nullable(spec: Spec) -> Spec:
    def check(value: Any, path: str) -> None:
        if value is not None:
            spec(value, path)

    return check


def _mapping_of(spec: Spec) -> Spec:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, got {_show(value)}")
        for key, item in value.items():
            spec(item, f"{path}.{key}")

    return check


def _list_of(spec: Spec) -> Spec:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise _fail(path, f"expected a list, got {_show(value)}")
        for index, item in enumerate(value):
            spec(item, f"{path}[{index}]")

    return check


def _object(required: Mapping[str, Spec], optional: Mapping[str, Spec] | None = None) -> Spec:
    optional = optional or {}

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, got {_show(value)}")
        unknown = sorted(set(value) - set(required) - set(optional))
        if unknown:
            raise _fail(path, f"unknown field {unknown[0]!r}")
        missing = sorted(set(required) - set(value))
        if missing:
            raise _fail(path, f"missing field {missing[0]!r}")
        for key, item in value.items():
            (required.get(key) or optional[key])(item, f"{path}.{key}")

    return check


def _either(*variants: tuple[frozenset[str], Spec]) -> Spec:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, got {_show(value)}")
        for marker, spec in variants:
            if marker & set(value):
                spec(value, path)
                return
        names = " or ".join(sorted(next(iter(marker)) for marker, _ in variants))
        raise _fail(path, f"missing field: one of {names}")

    return check


def _show(value: Any) -> str:
    kind = {bool: "boolean", str: "string", list: "list", dict: "object", type(None): "null"}
    return f"{kind.get(type(value), type(value).__name__)} {value!r}"[:120]


PAD = {"valence": _number, "arousal": _number, "dominance": _number}
OCEAN = {"O": _number, "C": _number, "E": _number, "A": _number, "N": _number}
GOALS = {
    "rapport": _number,
    "intellectual": _number,
    "autonomy": _number,
    "respect": _number,
    "honesty": _number,
}
EMOTIONS = _mapping_of(_number)
STATE_FIELDS: dict[str, Spec] = {
    **PAD,
    **OCEAN,
    **GOALS,
    "stage_int": _integer,
    "stage": _string,
    "baseline_valence": _number,
    "longing": _number,
    "comfort": _number,
    "trust_score": _number,
    "carried_thought": _nullable(_string),
}
COGNITION_IN = _object(
    {
        "reflection_pending": _boolean,
        "due_intention": _boolean,
        "open_thread": _boolean,
        "intentionality": _boolean,
        "curiosity": _boolean,
    },
    {"carried_thought": _boolean},
)
PRESENCE_OUT = _object(
    {
        "trust": _number,
        "valence": _number,
        "arousal": _number,
        "longing": _number,
        "awaiting": _boolean,
        "mode": _string,
        "line": _string,
        "affect": _object(PAD),
        "relationship": _object(
            {"stage": _string, "trust": _number, "longing": _number, "comfort": _number}
        ),
        "cognition": _object(
            {
                "reflection_pending": _boolean,
                "carried_thought": _boolean,
                "due_intention": _boolean,
                "open_thread": _boolean,
                "intentionality": _boolean,
                "curiosity": _boolean,
            }
        ),
        "source": _string,
    }
)
TURN_OUT = _object(
    {
        "mood": _object(PAD),
        "baseline_valence": _number,
        "active_emotions": EMOTIONS,
        "occ_carry": EMOTIONS,
    }
)

# --- turning validated inputs into kernel calls ----------------------------------------------

Thunk = Callable[[], Any]


def _mood(data: Mapping[str, Any]) -> Mood:
    return Mood(valence=data["valence"], arousal=data["arousal"], dominance=data["dominance"])


def _personality(data: Mapping[str, Any]) -> Personality:
    names = {
        "O": "openness",
        "C": "conscientiousness",
        "E": "extraversion",
        "A": "agreeableness",
        "N": "neuroticism",
    }
    return Personality(**{names[key]: data[key] for key in names if key in data})


def _goals(data: Mapping[str, Any]) -> Goals:
    return Goals(**{key: data[key] for key in GOALS if key in data})


def _stage_label(ordinal: int) -> str:
    # An ordinal off the ladder becomes an unknown label, which rests like the first stage:
    # exactly what baseline_weight gives (0.0) for an ordinal outside the ladder.
    if 1 <= ordinal <= len(DEFAULT_STAGE_LADDER.stages):
        return DEFAULT_STAGE_LADDER.stages[ordinal - 1]
    return f"unknown-stage-{ordinal}"


def _flat_state(data: Mapping[str, Any]) -> AffectState:
    if "stage" in data and "stage_int" in data:
        raise FixtureError("give either 'stage' or 'stage_int', not both")
    if "stage" in data:
        stage = data["stage"]
    else:
        stage = _stage_label(data["stage_int"]) if "stage_int" in data else "stranger"
    return AffectState(
        mood=Mood(**{key: data[key] for key in PAD if key in data}),
        personality=_personality(data),
        goals=_goals(data),
        relationship=RelationshipState(
            stage=stage,
            trust_score=data.get("trust_score", 0.0),
            comfort=data.get("comfort", 0.0),
        ),
        attachment=AttachmentState(longing=data.get("longing", 0.0)),
        baseline_valence=data.get("baseline_valence", 0.0),
        carried_thought=data.get("carried_thought"),
    )


def _pad_dict(mood: Mood) -> dict[str, float]:
    return {"valence": mood.valence, "arousal": mood.arousal, "dominance": mood.dominance}


def _unit(value: Any, name: str, low: float = -1.0, high: float = 1.0) -> float:
    try:
        return check_number(value, low, high)
    except ValueError as error:
        raise FixtureError(f"{name} {error}") from None


def _prepare_recency(data: Mapping[str, Any]) -> Thunk:
    now = _parse_now(data["now"]) if "now" in data else datetime.now(UTC)
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


def _parse_now(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise FixtureError(f"now is not an ISO-8601 timestamp: {text!r}") from None
    if moment.tzinfo is None:
        raise FixtureError(f"now must carry a UTC offset: {text!r}")
    return moment


def _prepare_candidate_score(data: Mapping[str, Any]) -> Thunk:
    _unit(data["distance"], "distance", 0.0, 2.0)
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
    mood, personality = _mood(data), _personality(data)
    baseline = _unit(data["baseline_valence"], "baseline_valence")
    stage: str | int = data["stage"] if "stage" in data else data["stage_int"]
    return lambda: _pad_dict(decay_mood(mood, personality, stage, baseline))


def _prepare_appraise_input(data: Mapping[str, Any]) -> Thunk:
    mood, goals = _mood(data), _goals(data)
    baseline = _unit(data["baseline_valence"], "baseline_valence")

    def run() -> dict[str, Any]:
        result = appraise_input(mood, goals, data["intent"], baseline)
        return {
            "emotions": result.emotions.to_dict(),
            "mood": _pad_dict(result.mood),
            "baseline_valence": result.baseline_valence,
        }

    return run


def _prepare_state_emotions(data: Mapping[str, Any]) -> Thunk:
    mood = Mood(valence=data["valence"], arousal=data["arousal"])
    longing = _unit(data["longing"], "longing", 0.0, 1.0)
    return lambda: state_emotions(mood, longing)


def _turn_dict(outcome_state: AffectState, active: EmotionMap) -> dict[str, Any]:
    return {
        "mood": _pad_dict(outcome_state.mood),
        "baseline_valence": outcome_state.baseline_valence,
        "active_emotions": active.to_dict(),
        "occ_carry": outcome_state.occ_carry.to_dict(),
    }


def _prepare_appraise_turn(data: Mapping[str, Any]) -> Thunk:
    state = _flat_state(data)
    carry = None if data.get("occ_carry") is None else EmotionMap(data["occ_carry"])

    def run() -> dict[str, Any]:
        outcome = appraise_turn(
            state, data["intent"], carry, data.get("expectation"), data.get("message", "")
        )
        return _turn_dict(outcome.state, outcome.active_emotions)

    return run


def _prepare_presence_vector(data: Mapping[str, Any]) -> Thunk:
    state = _flat_state(data)
    cognition = CognitionState(**data["cognition"]) if data.get("cognition") else None
    return lambda: build_presence_vector(state, cognition)


def _convert_then(
    convert: Callable[[Any], Any], compute: Callable[[Any], Any]
) -> Callable[[Any], Thunk]:
    """Validate and convert at prepare time; compute only when the case runs."""

    def prepare(data: Any) -> Thunk:
        value = convert(data)
        return lambda: compute(value)

    return prepare


def _optional_mood(data: Any) -> Mood | None:
    return None if data is None else _mood(data)


def _stage_of(data: Mapping[str, Any]) -> Any:
    return data["stage"]


@dataclass(frozen=True)
class _Function:
    input_spec: Spec
    output_spec: Spec
    prepare: Callable[[Any], Thunk]


def _decoding_dict(mood: Mood | None) -> dict[str, Any]:
    params = decoding_params(mood)
    return {"temperature": params.temperature, "top_p": params.top_p}


def _prepare_length(data: Mapping[str, Any]) -> Thunk:
    try:
        budget = check_int(data["base_tokens"], 1)
    except ValueError as error:
        raise FixtureError(f"base_tokens {error}") from None
    mood = _mood(data)
    return lambda: apply_length_factor(budget, mood)


def _prepare_congruence(data: Mapping[str, Any]) -> Thunk:
    memory = _unit(data["mem_valence"], "mem_valence")
    mood = _unit(data["mood_valence"], "mood_valence")
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


_STAGE_CHOICE = ({"stage_int": _integer}, {"stage": _string})

FUNCTIONS: dict[str, dict[str, _Function]] = {
    "affect_control": {
        "mood_octant": _Function(_object(PAD), _string, _convert_then(_mood, mood_octant)),
        "decoding_params": _Function(
            _nullable(_object(PAD)),
            _object({"temperature": _number, "top_p": _nullable(_number)}),
            _convert_then(_optional_mood, _decoding_dict),
        ),
        "length_factor": _Function(
            _nullable(_object(PAD)), _number, _convert_then(_optional_mood, length_factor)
        ),
        "apply_length_factor": _Function(
            _object({**PAD, "base_tokens": _integer}), _integer, _prepare_length
        ),
        "is_ambivalent": _Function(EMOTIONS, _boolean, _convert_then(EmotionMap, is_ambivalent)),
    },
    "retrieval": {
        "recency_weight": _Function(
            _either(
                (frozenset({"days_ago"}), _object({"days_ago": _number}, {"now": _string})),
                (frozenset({"timestamp"}), _object({"timestamp": _string}, {"now": _string})),
            ),
            _number,
            _prepare_recency,
        ),
        "mood_congruence_factor": _Function(
            _object({"mem_valence": _number, "mood_valence": _number, "congruence_on": _boolean}),
            _number,
            _prepare_congruence,
        ),
        "candidate_score": _Function(
            _object(
                {
                    "distance": _number,
                    "days_ago": _number,
                    "episode": _boolean,
                    "significance": _number,
                    "recall_count": _integer,
                }
            ),
            _number,
            _prepare_candidate_score,
        ),
    },
    "appraisal": {
        "mood_inertia": _Function(
            _object(OCEAN), _number, _convert_then(_personality, mood_inertia)
        ),
        "stage_int": _Function(
            _object({"stage": _string}), _integer, _convert_then(_stage_of, stage_int)
        ),
        "baseline_weight": _Function(
            _object({"stage_int": _integer}), _number, _prepare_baseline_weight
        ),
        "decay_mood": _Function(
            _either(
                *(
                    (
                        frozenset(choice),
                        _object({**PAD, **OCEAN, **choice, "baseline_valence": _number}),
                    )
                    for choice in _STAGE_CHOICE
                )
            ),
            _object(PAD),
            _prepare_decay_mood,
        ),
        "appraise_input": _Function(
            _object({**PAD, **GOALS, "intent": _string, "baseline_valence": _number}),
            _object({"emotions": EMOTIONS, "mood": _object(PAD), "baseline_valence": _number}),
            _prepare_appraise_input,
        ),
        "expectation_emotions": _Function(
            _object({"expectation": _string, "message": _string}),
            EMOTIONS,
            lambda d: lambda: expectation_emotions(d["expectation"], d["message"]),
        ),
        "occ_carry_decay": _Function(
            EMOTIONS, EMOTIONS, _convert_then(EmotionMap, decay_occ_carry)
        ),
        "state_emotions": _Function(
            _object({"valence": _number, "arousal": _number, "longing": _number}),
            EMOTIONS,
            _prepare_state_emotions,
        ),
        "appraise_turn": _Function(
            _object(
                {"intent": _string},
                {
                    **STATE_FIELDS,
                    "occ_carry": _nullable(EMOTIONS),
                    "expectation": _nullable(_string),
                    "message": _string,
                },
            ),
            TURN_OUT,
            _prepare_appraise_turn,
        ),
    },
    "surfacing": {
        "clean_text": _Function(
            _object({"value": _anything, "max_len": _integer}),
            _nullable(_string),
            _prepare_clean_text,
        ),
        "presence_line": _Function(
            _object(
                {
                    "reflection_pending": _boolean,
                    "due_intention": _boolean,
                    "carried_thought": _boolean,
                    "open_thread": _boolean,
                }
            ),
            _string,
            _prepare_presence_line,
        ),
        "presence_vector": _Function(
            _object({}, {**STATE_FIELDS, "cognition": _nullable(COGNITION_IN)}),
            PRESENCE_OUT,
            _prepare_presence_vector,
        ),
    },
}

TRACE_INITIAL = _object(
    {"mood": _object(PAD), "personality": _object({}, OCEAN), "baseline_valence": _number},
    {
        "goals": _object({}, GOALS),
        "stage": _string,
        "longing": _number,
        "occ_carry": EMOTIONS,
        "expectation": _nullable(_string),
    },
)
TRACE_STEP = _object(
    {
        "event": _object(
            {"intent": _string, "message": _string}, {"expectation": _nullable(_string)}
        ),
        "expected": TURN_OUT,
    }
)
TRACE = _object({"name": _string, "initial": TRACE_INITIAL, "steps": _list_of(TRACE_STEP)})
CASE = _object({"in": _anything, "out": _anything})

# --- fixtures, cases, reports -----------------------------------------------------------------


@dataclass(frozen=True)
class _Case:
    category: str
    index: int
    expected: Any
    run: Thunk


@dataclass(frozen=True)
class Fixture:
    """A validated fixture file, ready to run: its source name, kind and cases in order."""

    source: str
    kind: str
    cases: tuple[_Case, ...]


@dataclass(frozen=True)
class CaseFailure:
    """One case whose actual output differs from the expected one."""

    source: str
    index: int
    expected: Any
    actual: Any


@dataclass
class CategoryReport:
    """Pass and fail counts of one category (a kernel function or one trace)."""

    name: str
    passed: int = 0
    failures: list[CaseFailure] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """How many cases failed."""
        return len(self.failures)


@dataclass
class ConformanceReport:
    """Every category's outcome and the totals."""

    categories: list[CategoryReport]

    @property
    def passed(self) -> int:
        """Cases and trace steps that matched."""
        return sum(category.passed for category in self.categories)

    @property
    def failed(self) -> int:
        """Cases and trace steps that did not match."""
        return sum(category.failed for category in self.categories)

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {
            "categories": [
                {
                    "name": category.name,
                    "passed": category.passed,
                    "failed": category.failed,
                    "failures": [
                        {
                            "file": failure.source,
                            "case": failure.index,
                            "expected": failure.expected,
                            "actual": failure.actual,
                        }
                        for failure in category.failures
                    ],
                }
                for category in self.categories
            ],
            "passed": self.passed,
            "failed": self.failed,
        }


def parse_fixture(payload: Any, *, source: str) -> Fixture:
    """Validate a parsed fixture strictly and prepare every case; raise FixtureError if unusable.

    Nothing runs here: every input is checked against its schema and the kernel's models first.
    """
    if not isinstance(payload, dict):
        raise FixtureError(f"{source}: the top level must be an object, got {_show(payload)}")
    try:
        if "traces" in payload:
            return Fixture(source, "trace", _parse_traces(payload))
        if set(payload) & set(FUNCTIONS):
            return Fixture(source, "kernel", _parse_kernel(payload))
    except FixtureError as error:
        raise FixtureError(f"{source}: {error}") from None
    raise FixtureError(
        f"{source}: neither a kernel fixture (groups {', '.join(FUNCTIONS)}) nor a trace fixture"
    )


def _meta_count(payload: Mapping[str, Any], key: str, actual: int) -> None:
    meta = payload.get("_meta")
    if not isinstance(meta, dict):
        raise _fail("_meta", "missing or not an object")
    if key not in meta:
        raise _fail("_meta", f"missing field {key!r}")
    _integer(meta[key], f"_meta.{key}")
    if meta[key] != actual:
        raise _fail(f"_meta.{key}", f"says {meta[key]} but the file holds {actual}")


def _prepared(thunk_factory: Callable[[Any], Thunk], data: Any, path: str) -> Thunk:
    try:
        return thunk_factory(data)
    except ValidationError as error:
        detail = error.errors()[0]
        where = ".".join(str(part) for part in detail["loc"])
        message = str(detail["msg"]).removeprefix("Value error, ")
        raise _fail(f"{path}.{where}" if where else path, f"{message}") from None
    except (FixtureError, AffectMemoryError) as error:
        raise _fail(path, str(error)) from None


def _parse_kernel(payload: Mapping[str, Any]) -> tuple[_Case, ...]:
    unknown = sorted(set(payload) - set(FUNCTIONS) - {"_meta"})
    if unknown:
        raise _fail(unknown[0], "unknown group")
    cases: list[_Case] = []
    for group, functions in payload.items():
        if group == "_meta":
            continue
        if not isinstance(functions, dict):
            raise _fail(group, f"expected an object of functions, got {_show(functions)}")
        for name, raw_cases in functions.items():
            if name not in FUNCTIONS[group]:
                raise _fail(f"{group}.{name}", "unknown function")
            function = FUNCTIONS[group][name]
            path = f"{group}.{name}"
            _list_of(CASE)(raw_cases, path)
            for index, case in enumerate(raw_cases):
                where = f"{path}[{index}]"
                function.input_spec(case["in"], f"{where}.in")
                function.output_spec(case["out"], f"{where}.out")
                run = _prepared(function.prepare, case["in"], f"{where}.in")
                cases.append(_Case(f"{group}/{name}", index, case["out"], run))
    _meta_count(payload, "cases", len(cases))
    return tuple(cases)


def _parse_traces(payload: Mapping[str, Any]) -> tuple[_Case, ...]:
    unknown = sorted(set(payload) - {"_meta", "traces"})
    if unknown:
        raise _fail(unknown[0], "unknown field")
    _list_of(TRACE)(payload["traces"], "traces")
    _meta_count(payload, "traces", len(payload["traces"]))
    cases: list[_Case] = []
    for number, trace in enumerate(payload["traces"]):
        state = _prepared(_trace_state, trace["initial"], f"traces[{number}].initial")()
        outcomes = _TraceRun(state)
        for index, step in enumerate(trace["steps"]):
            cases.append(
                _Case(
                    f"trace/{trace['name']}",
                    index,
                    step["expected"],
                    outcomes.step(index, step["event"]),
                )
            )
    return tuple(cases)


def _trace_state(initial: Mapping[str, Any]) -> Thunk:
    state = AffectState(
        mood=_mood(initial["mood"]),
        personality=_personality(initial["personality"]),
        goals=_goals(initial.get("goals", {})),
        relationship=RelationshipState(stage=initial.get("stage", "stranger")),
        attachment=AttachmentState(longing=initial.get("longing", 0.0)),
        baseline_valence=initial["baseline_valence"],
        occ_carry=initial.get("occ_carry", {}),
        expectation=initial.get("expectation"),
    )
    return lambda: state


class _TraceRun:
    """Runs a trace's steps in order, each from the previous step's state, on demand."""

    def __init__(self, initial: AffectState) -> None:
        self._states = [initial]
        self._results: list[dict[str, Any]] = []

    def step(self, index: int, event: Mapping[str, Any]) -> Thunk:
        def run() -> dict[str, Any]:
            if len(self._results) != index:
                raise FixtureError("trace steps must run in order")
            outcome = appraise_turn(
                self._states[-1], event["intent"], None, event.get("expectation"), event["message"]
            )
            self._states.append(outcome.state)
            self._results.append(_turn_dict(outcome.state, outcome.active_emotions))
            return self._results[-1]

        return run


def _matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int) and isinstance(actual, int):
        return expected == actual
    if isinstance(expected, int | float):
        return (
            isinstance(actual, int | float)
            and math.isfinite(actual)
            and abs(expected - actual) <= FLOAT_TOLERANCE
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, Mapping)
            and set(expected) == set(actual)
            and all(_matches(expected[key], actual[key]) for key in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, Sequence)
            and not isinstance(actual, str)
            and len(expected) == len(actual)
            and all(_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(type(expected) is type(actual) and expected == actual)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _jsonable(item) for key, item in value.items()}
    return value


def run_fixtures(fixtures: Sequence[Fixture]) -> ConformanceReport:
    """Run every prepared case; a case that raises counts as failed, with the error as actual."""
    categories: dict[str, CategoryReport] = {}
    for fixture in fixtures:
        for case in fixture.cases:
            report = categories.setdefault(case.category, CategoryReport(case.category))
            try:
                actual = _jsonable(case.run())
            except Exception as error:  # a kernel bug must be reported, not crash the run
                actual = f"raised {type(error).__name__}: {error}"
            if _matches(case.expected, actual):
                report.passed += 1
            else:
                report.failures.append(
                    CaseFailure(fixture.source, case.index, case.expected, actual)
                )
    return ConformanceReport(list(categories.values()))
