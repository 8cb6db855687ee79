"""The conformance runner on the project's own fixtures, the reference ones, and broken ones."""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from affect_memory.conformance.cases import FUNCTIONS
from affect_memory.conformance.runner import matches, parse_fixture, run_fixtures
from affect_memory.kernel.errors import FixtureError
from tests.kernel.fixture_tools import (
    REFERENCE_TOTAL,
    altered,
    expected_slots,
    expected_total,
    own_fixture_paths,
    reference_paths,
)


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _run(payloads: list[tuple[str, Any]]) -> Any:
    return run_fixtures([parse_fixture(payload, source=name) for name, payload in payloads])


@pytest.fixture(scope="module")
def own() -> list[tuple[str, Any]]:
    paths = own_fixture_paths()
    names = {path.name for path in paths}
    assert {"kernel_cases.json", "continuity_traces.json"} <= names
    return [(path.name, _load(path)) for path in paths]


def _own_kernel(own: list[tuple[str, Any]]) -> dict[str, Any]:
    return copy.deepcopy(dict(own)["kernel_cases.json"])


def _own_traces(own: list[tuple[str, Any]]) -> dict[str, Any]:
    return copy.deepcopy(dict(own)["continuity_traces.json"])


def test_own_fixtures_all_pass(own: list[tuple[str, Any]]) -> None:
    report = _run(own)
    failures = [f for c in report.categories for f in c.failures]
    assert failures == []
    assert report.passed == expected_total(own_fixture_paths())


def test_own_kernel_fixture_covers_every_function(own: list[tuple[str, Any]]) -> None:
    payload = _own_kernel(own)
    covered = {(group, name) for group in FUNCTIONS for name in payload.get(group, {})}
    every = {(group, name) for group, functions in FUNCTIONS.items() for name in functions}
    assert covered == every
    assert len(every) == 20
    assert payload["_meta"]["cases"] == sum(
        len(cases) for group in FUNCTIONS for cases in payload[group].values()
    )
    assert "note" in payload["_meta"]


def test_own_trace_fixture_holds_traces_of_three_or_more_steps(own: list[tuple[str, Any]]) -> None:
    payload = _own_traces(own)
    assert payload["_meta"]["traces"] == len(payload["traces"]) >= 3
    assert all(len(trace["steps"]) >= 3 for trace in payload["traces"])


def test_reference_fixtures_all_pass() -> None:
    paths = reference_paths()
    report = _run([(path.name, _load(path)) for path in paths])
    assert report.failed == 0, report.to_json()
    assert report.passed == REFERENCE_TOTAL


def test_altering_one_output_per_category_fails_exactly_that_case(
    own: list[tuple[str, Any]],
) -> None:
    for source, original in own:
        seen: set[str] = set()
        for index, (category, _, _) in enumerate(expected_slots(original)):
            if category in seen:
                continue
            seen.add(category)
            payload = copy.deepcopy(original)
            _, holder, key = list(expected_slots(payload))[index]
            holder[key] = altered(holder[key])
            report = _run([(source, payload)])
            failed = {c.name: c.failed for c in report.categories if c.failed}
            assert failed == {category: 1}, (source, category)


def test_floats_match_within_one_billionth(own: list[tuple[str, Any]]) -> None:
    payload = _own_kernel(own)
    case = payload["retrieval"]["candidate_score"][0]
    exact = case["out"]
    case["out"] = exact + 5e-10
    assert _run([("near", payload)]).failed == 0
    case["out"] = exact + 2e-9
    assert _run([("far", payload)]).failed == 1


def test_a_trace_step_starts_from_the_previous_steps_state(own: list[tuple[str, Any]]) -> None:
    payload = _own_traces(own)
    trace = payload["traces"][0]
    trace["steps"] = trace["steps"][1:]
    report = _run([("shifted", {**payload, "traces": [trace], "_meta": {"traces": 1}})])
    assert report.failed == len(trace["steps"])


def test_the_json_report_carries_each_failure(own: list[tuple[str, Any]]) -> None:
    payload = _own_kernel(own)
    payload["appraisal"]["stage_int"][2]["out"] = 5
    data = _run([("one.json", payload)]).to_json()
    assert data["failed"] == 1
    failing = [c for c in data["categories"] if c["failed"]]
    assert failing[0]["name"] == "appraisal/stage_int"
    assert failing[0]["failures"] == [{"file": "one.json", "case": 2, "expected": 5, "actual": 3}]
    json.dumps(data)


# --- refusals ----------------------------------------------------------------------------------


def _kernel(cases: dict[str, Any], count: int | None = None) -> dict[str, Any]:
    total = sum(len(c) for functions in cases.values() for c in functions.values())
    return {"_meta": {"cases": total if count is None else count}, **cases}


GOOD_OCTANT = {"in": {"valence": 0.5, "arousal": 0.5, "dominance": 0.5}, "out": "exuberant"}


@pytest.mark.parametrize(
    "payload, problem",
    [
        ([], "top level must be an object"),
        ({"_meta": {"cases": 0}}, "neither a kernel fixture"),
        (_kernel({"affect_control": {"mood_octant": [GOOD_OCTANT]}}, 2), "says 2"),
        ({"affect_control": {"mood_octant": [GOOD_OCTANT]}}, "_meta"),
        ({**_kernel({"affect_control": {"mood_octant": [GOOD_OCTANT]}}), "extra": {}}, "extra"),
        (_kernel({"affect_control": {"octant": [GOOD_OCTANT]}}), "unknown function"),
        (_kernel({"affect_control": {"mood_octant": [{**GOOD_OCTANT, "note": 1}]}}), "'note'"),
        (_kernel({"affect_control": {"mood_octant": [{"in": GOOD_OCTANT["in"]}]}}), "'out'"),
        (
            _kernel(
                {
                    "affect_control": {
                        "mood_octant": [
                            {"in": {**GOOD_OCTANT["in"], "pleasure": 0.1}, "out": "exuberant"}
                        ]
                    }
                }
            ),
            "'pleasure'",
        ),
        (
            _kernel(
                {
                    "affect_control": {
                        "mood_octant": [
                            {"in": {**GOOD_OCTANT["in"], "valence": True}, "out": "exuberant"}
                        ]
                    }
                }
            ),
            "valence",
        ),
        (
            _kernel(
                {
                    "affect_control": {
                        "mood_octant": [
                            {"in": {**GOOD_OCTANT["in"], "valence": math.nan}, "out": "exuberant"}
                        ]
                    }
                }
            ),
            "finite",
        ),
        (
            _kernel(
                {
                    "affect_control": {
                        "mood_octant": [
                            {"in": {**GOOD_OCTANT["in"], "valence": 1.5}, "out": "exuberant"}
                        ]
                    }
                }
            ),
            "valence",
        ),
        (
            _kernel({"affect_control": {"mood_octant": [{"in": GOOD_OCTANT["in"], "out": 3}]}}),
            "expected a string",
        ),
        (
            _kernel({"retrieval": {"recency_weight": [{"in": {"days_ago": 1e9}, "out": 0.4}]}}),
            "days_ago",
        ),
        (
            _kernel(
                {
                    "retrieval": {
                        "recency_weight": [
                            {"in": {"days_ago": 1, "now": "2026-01-01T00:00:00"}, "out": 0.4}
                        ]
                    }
                }
            ),
            "UTC offset",
        ),
        (
            _kernel(
                {
                    "appraisal": {
                        "decay_mood": [
                            {
                                "in": {
                                    "valence": 0,
                                    "arousal": 0,
                                    "dominance": 0,
                                    "O": 0.5,
                                    "C": 0.5,
                                    "E": 0.5,
                                    "A": 0.5,
                                    "N": 0.5,
                                    "stage": "friend",
                                    "stage_int": 3,
                                    "baseline_valence": 0,
                                },
                                "out": {"valence": 0, "arousal": 0, "dominance": 0},
                            }
                        ]
                    }
                }
            ),
            "stage",
        ),
        ({"_meta": {"traces": 1}, "traces": []}, "says 1"),
        ({"_meta": {"traces": 0}, "traces": [], "cases": []}, "cases: unknown field"),
    ],
)
def test_unusable_fixtures_are_refused_before_anything_runs(payload: Any, problem: str) -> None:
    with pytest.raises(FixtureError, match=r"broken\.json") as caught:
        parse_fixture(payload, source="broken.json")
    assert problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_kernel_error_while_running_counts_as_a_failure_not_a_crash() -> None:
    # 10**400 tokens is a valid int, but scaling it overflows a float inside the kernel.
    payload = _kernel(
        {
            "affect_control": {
                "apply_length_factor": [
                    {
                        "in": {
                            "base_tokens": 10**400,
                            "valence": 0,
                            "arousal": -0.9,
                            "dominance": 0,
                        },
                        "out": 1,
                    }
                ]
            }
        }
    )
    report = _run([("huge", payload)])
    assert report.failed == 1
    assert str(report.categories[0].failures[0].actual).startswith("raised OverflowError")


@pytest.mark.parametrize(
    "expected, actual, same",
    [
        (True, 1, False),
        (1, True, False),
        (False, 0.0, False),
        (True, True, True),
        (1, 1.0, True),
        (0.5, 0.5 + 9e-10, True),
        (0.5, 0.5 + 1.1e-9, False),
        (0.5, math.nan, False),
        ("a", "a", True),
        (None, None, True),
        (None, "", False),
        ({"a": 1.0}, {"a": 1.0, "b": 0.0}, False),
        ({"a": 1.0, "b": 0.0}, {"b": 0.0, "a": 1.0}, True),
        ([1, 2], [1, 2], True),
        ([1, 2], [2, 1], False),
        ([1], "1", False),
    ],
)
def test_outputs_compare_exactly_except_floats(expected: Any, actual: Any, same: bool) -> None:
    # Booleans never equal numbers, key sets must match exactly, floats within 1e-9.
    assert matches(expected, actual) is same


def test_a_case_without_now_is_scored_at_the_injected_clock() -> None:
    payload = {
        "_meta": {"cases": 2},
        "retrieval": {
            "recency_weight": [
                {"in": {"timestamp": "2026-01-01T00:00:00Z"}, "out": 0.5},
                {"in": {"days_ago": 15}, "out": 0.75},
            ]
        },
    }

    def at(moment: datetime) -> Any:
        fixture = parse_fixture(payload, source="clocked.json", clock=lambda: moment)
        return run_fixtures([fixture])

    thirty_days_on = at(datetime(2026, 1, 31, tzinfo=UTC))
    assert (thirty_days_on.passed, thirty_days_on.failed) == (2, 0)
    later = at(datetime(2026, 3, 2, tzinfo=UTC))  # the timestamp case is then 60 days old
    assert (later.passed, later.failed) == (1, 1)
