"""``affect-memory conformance`` as a user runs it: exit codes, the summary line, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from affect_memory.cli import main
from tests.kernel.fixture_tools import (
    REFERENCE_TOTAL,
    ROOT,
    altered,
    expected_slots,
    expected_total,
    own_fixture_paths,
    reference_paths,
)


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", "conformance", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["conformance", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _alter_copy(source: Path, target: Path, indices: list[int]) -> None:
    payload = json.loads(source.read_text(encoding="utf-8"))
    slots = list(expected_slots(payload))
    for index in indices:
        _, holder, key = slots[index]
        holder[key] = altered(holder[key])
    target.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")


def test_reference_fixtures_pass_with_the_exact_summary_line() -> None:
    result = _cli(*reference_paths())
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{REFERENCE_TOTAL} passed, 0 failed"
    assert result.stderr == ""


def test_own_fixtures_pass_with_the_exact_summary_line() -> None:
    paths = own_fixture_paths()
    result = _cli(*paths)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{expected_total(paths)} passed, 0 failed"


def test_k_altered_reference_outputs_give_exactly_k_failures(tmp_path: Path) -> None:
    golden, traces = reference_paths()
    _alter_copy(golden, tmp_path / "kernel.json", [0, 17, 100, 224])
    _alter_copy(traces, tmp_path / "traces.json", [4])
    result = _cli(tmp_path / "kernel.json", tmp_path / "traces.json")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == f"{REFERENCE_TOTAL - 5} passed, 5 failed"


@pytest.mark.parametrize("indices", [[0], [3, 50, 120], list(range(0, 230, 23))])
def test_k_altered_own_outputs_give_exactly_k_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], indices: list[int]
) -> None:
    source = ROOT / "fixtures" / "kernel_cases.json"
    target = tmp_path / "altered.json"
    _alter_copy(source, target, indices)
    code, out, _ = _main(capsys, target)
    total = expected_total([source])
    assert code == 1
    assert out.splitlines()[-1] == f"{total - len(indices)} passed, {len(indices)} failed"
    assert out.count("    case ") == len(indices)


def _good_case() -> dict[str, Any]:
    return {"in": {"valence": 0.5, "arousal": 0.5, "dominance": 0.5}, "out": "exuberant"}


def _kernel_text(case: Any, count: int = 1, extra: str = "") -> str:
    body = case if isinstance(case, str) else json.dumps(case)
    return (
        f'{{"_meta": {{"cases": {count}}}{extra}, "affect_control": {{"mood_octant": [{body}]}}}}'
    )


REFUSALS: dict[str, tuple[str | None, str]] = {
    "unknown field": (
        _kernel_text({**_good_case(), "comment": "x"}),
        "unknown field 'comment'",
    ),
    "NaN": (
        _kernel_text('{"in": {"valence": NaN, "arousal": 0, "dominance": 0}, "out": "neutral"}'),
        "NaN",
    ),
    "wrong type": (
        _kernel_text({"in": {"valence": "0.5", "arousal": 0, "dominance": 0}, "out": "x"}),
        "expected a number",
    ),
    "wrong meta count": (_kernel_text(_good_case(), count=3), "says 3 but the file holds 1"),
    "malformed JSON": ('{"_meta": {"cases": 1}, "affect_control": ', "malformed JSON"),
    "missing file": (None, "no such file"),
    "duplicate key": (
        _kernel_text(_good_case(), extra=', "_meta": {"cases": 1}'),
        "key '_meta' appears twice",
    ),
    "a directory": (None, "cannot be read"),
    "not UTF-8": (None, "cannot be read"),
    "meta count as text": (
        '{"_meta": {"cases": "1"}, "affect_control": {"mood_octant": []}}',
        "expected an integer",
    ),
    "infinity": (
        _kernel_text('{"in": {"valence": Infinity, "arousal": 0, "dominance": 0}, "out": "x"}'),
        "Infinity",
    ),
    "unknown trace event field": (
        '{"_meta": {"traces": 1}, "traces": [{"name": "t", "initial": {"mood": {"valence": 0, '
        '"arousal": 0, "dominance": 0}, "personality": {}, "baseline_valence": 0}, "steps": '
        '[{"event": {"intent": "CASUAL", "message": "", "mood": 1}, "expected": {}}]}]}',
        "unknown field 'mood'",
    ),
    "trace fixture with an unknown initial field": (
        '{"_meta": {"traces": 1}, "traces": [{"name": "t", "initial": {"mood": {"valence": 0, '
        '"arousal": 0, "dominance": 0}, "personality": {}, "baseline_valence": 0, "x": 1}, '
        '"steps": []}]}',
        "unknown field 'x'",
    ),
}


def _write_refusal(tmp_path: Path, name: str) -> tuple[Path, str]:
    text, problem = REFUSALS[name]
    path = tmp_path / "bad.json"
    if name == "a directory":
        path.mkdir()
    elif name == "not UTF-8":
        path.write_bytes(b'{"_meta": {"cases": 0}, "x": "\xff"}')
    elif text is not None:
        path.write_text(text, encoding="utf-8")
    return path, problem


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_unusable_files_exit_2_with_one_line_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path, problem = _write_refusal(tmp_path, name)
    code, out, err = _main(capsys, ROOT / "fixtures" / "kernel_cases.json", path)
    assert code == 2, out + err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("affect-memory conformance: ")
    assert str(path) in lines[0]
    assert problem in lines[0]
    assert out == ""  # nothing ran: every file is validated first


@pytest.mark.parametrize("name", ["NaN", "missing file"])
def test_a_refusing_process_prints_one_line_and_no_traceback(tmp_path: Path, name: str) -> None:
    path, problem = _write_refusal(tmp_path, name)
    result = _cli(path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"affect-memory conformance: {path}: ")
    assert problem in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_json_report_parses_and_matches_the_text_report(tmp_path: Path) -> None:
    source = ROOT / "fixtures" / "kernel_cases.json"
    target = tmp_path / "altered.json"
    _alter_copy(source, target, [5, 60])
    text = _cli(target, ROOT / "fixtures" / "continuity_traces.json")
    as_json = _cli(target, ROOT / "fixtures" / "continuity_traces.json", "--json")
    assert text.returncode == as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert (report["passed"], report["failed"]) == (
        expected_total([source, ROOT / "fixtures" / "continuity_traces.json"]) - 2,
        2,
    )
    assert text.stdout.splitlines()[-1] == f"{report['passed']} passed, {report['failed']} failed"
    names = [line.split()[0] for line in text.stdout.splitlines()[:-1] if not line.startswith(" ")]
    assert names == [category["name"] for category in report["categories"]]
    for category in report["categories"]:
        assert category["failed"] == len(category["failures"])
        for failure in category["failures"]:
            assert failure["file"] == str(target)
            assert failure["expected"] != failure["actual"]
