"""Finding the project's and the reference fixtures, and altering expected outputs on purpose."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
KERNEL_GROUPS = ("affect_control", "retrieval", "appraisal", "surfacing")
REFERENCE_FILES = ("kernel_golden.json", "continuity_traces.json")
REFERENCE_ENV = "AFFECT_REFERENCE_FIXTURES"
REFERENCE_TOTAL = 234
"""225 kernel cases and 3 traces of 3 steps."""


def is_conformance_fixture(payload: Any) -> bool:
    """Whether a parsed file is in the reference schema (other JSON data may live in fixtures/)."""
    if not isinstance(payload, dict) or "_meta" not in payload:
        return False
    return "traces" in payload or any(group in payload for group in KERNEL_GROUPS)


def own_fixture_paths() -> list[Path]:
    """The project's own conformance fixtures under fixtures/, by shape."""
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        if is_conformance_fixture(json.loads(path.read_text(encoding="utf-8"))):
            found.append(path)
    return found


def expected_total(paths: list[Path]) -> int:
    """Cases plus trace steps the files hold, counted from their contents."""
    total = 0
    for path in paths:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if "traces" in payload:
            total += sum(len(trace["steps"]) for trace in payload["traces"])
        else:
            total += sum(
                len(cases) for group in KERNEL_GROUPS for cases in payload.get(group, {}).values()
            )
    return total


def reference_dir() -> Path:
    """The reference fixture folder named by AFFECT_REFERENCE_FIXTURES, or skip the test."""
    folder = os.environ.get(REFERENCE_ENV, "")
    if not folder:
        pytest.skip(
            f"reference fixtures not configured: set {REFERENCE_ENV}=../shared/golden (the folder "
            "holding kernel_golden.json and continuity_traces.json) to run them; .ci/run does"
        )
    path = Path(folder)
    missing = [name for name in REFERENCE_FILES if not (path / name).is_file()]
    assert not missing, f"{REFERENCE_ENV}={folder} does not hold {', '.join(missing)}"
    return path


def reference_paths() -> list[Path]:
    """Both reference files, or skip."""
    folder = reference_dir()
    return [folder / name for name in REFERENCE_FILES]


def altered(value: Any) -> Any:
    """A schema-valid value that no correct kernel output can match."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return "x"
    if isinstance(value, dict):
        if not value:
            return {"joy": 0.5}
        key = next(iter(value))
        return {**value, key: altered(value[key])}
    raise TypeError(f"cannot alter {value!r}")


def expected_slots(payload: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every (category, holder, key) whose ``holder[key]`` is one expected output."""
    if "traces" in payload:
        for trace in payload["traces"]:
            for step in trace["steps"]:
                yield f"trace/{trace['name']}", step, "expected"
        return
    for group in KERNEL_GROUPS:
        for name, cases in payload.get(group, {}).items():
            for case in cases:
                yield f"{group}/{name}", case, "out"
