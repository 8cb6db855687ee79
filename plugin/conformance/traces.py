"""Trace cases: turns appraised in order with the default policy, each from the state before.

A trace fixture holds ``traces``, each an initial state and steps of ``{"event", "expected"}``.
A step's case runs only after the steps before it, since it starts from their state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from affect_memory.conformance import values
from affect_memory.conformance.cases import Case, Thunk, check_meta_count, prepared
from affect_memory.conformance.schema import (
    EMOTIONS,
    GOALS,
    OCEAN,
    PAD,
    TURN_OUT,
    fail,
    list_of,
    nullable,
    number,
    object_of,
    string,
)
from affect_memory.kernel.appraisal import appraise_turn
from affect_memory.kernel.errors import FixtureError
from affect_memory.kernel.models import AffectState, AttachmentState, RelationshipState

__all__ = ["TRACE", "parse_trace_cases"]

TRACE_INITIAL = object_of(
    {"mood": object_of(PAD), "personality": object_of({}, OCEAN), "baseline_valence": number},
    {
        "goals": object_of({}, GOALS),
        "stage": string,
        "longing": number,
        "occ_carry": EMOTIONS,
        "expectation": nullable(string),
    },
)
TRACE_STEP = object_of(
    {
        "event": object_of(
            {"intent": string, "message": string}, {"expectation": nullable(string)}
        ),
        "expected": TURN_OUT,
    }
)
TRACE = object_of({"name": string, "initial": TRACE_INITIAL, "steps": list_of(TRACE_STEP)})
"""One trace: its name, its initial state and its steps."""


def parse_trace_cases(payload: Mapping[str, Any]) -> tuple[Case, ...]:
    """Every step of every trace as a case, checked and prepared, in file order."""
    unknown = sorted(set(payload) - {"_meta", "traces"})
    if unknown:
        raise fail(unknown[0], "unknown field")
    list_of(TRACE)(payload["traces"], "traces")
    check_meta_count(payload, "traces", len(payload["traces"]))
    cases: list[Case] = []
    for position, trace in enumerate(payload["traces"]):
        state = prepared(_trace_state, trace["initial"], f"traces[{position}].initial")()
        outcomes = _TraceRun(state)
        for index, step in enumerate(trace["steps"]):
            cases.append(
                Case(
                    f"trace/{trace['name']}",
                    index,
                    step["expected"],
                    outcomes.step(index, step["event"]),
                )
            )
    return tuple(cases)


def _trace_state(initial: Mapping[str, Any]) -> Thunk:
    state = AffectState(
        mood=values.mood(initial["mood"]),
        personality=values.personality(initial["personality"]),
        goals=values.goals(initial.get("goals", {})),
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
            self._results.append(values.turn_dict(outcome.state, outcome.active_emotions))
            return self._results[-1]

        return run
