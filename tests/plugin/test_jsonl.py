"""Strict JSON for user input: repeated keys, NaN, deep nesting and long numbers refused in one
line each; a JSON Lines file read line by line, every bad line named by its number."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from affect_memory.errors import RecordError
from affect_memory.jsonl import (
    MAX_JSON_DEPTH,
    MAX_NUMBER_DIGITS,
    DuplicateKeyError,
    JsonBoundsError,
    loads_strict,
    read_jsonl,
)
from affect_memory.kernel.errors import InvalidInputError


def test_a_repeated_key_is_refused_naming_it_unless_the_last_may_win() -> None:
    text = '{"user_id": "a", "text": "x", "user_id": "b"}'
    with pytest.raises(DuplicateKeyError, match="key 'user_id' appears twice") as caught:
        loads_strict(text)
    assert caught.value.key == "user_id"
    assert loads_strict(text, unique_keys=False)["user_id"] == "b"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused_unless_allowed(constant: str) -> None:
    with pytest.raises(ValueError, match=f"{constant} is not a number JSON allows"):
        loads_strict(f"[{constant}]")
    (value,) = loads_strict(f"[{constant}]", non_finite=True)
    assert math.isnan(value) or math.isinf(value)


def test_nesting_is_bounded_without_recursion_errors() -> None:
    assert loads_strict("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    deeper = '{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(JsonBoundsError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        loads_strict(deeper)
    with pytest.raises(JsonBoundsError, match="nested deeper"):
        loads_strict("[" * 100_000 + "]" * 100_000)  # past Python's own recursion limit


@pytest.mark.parametrize("number", ["1" * (MAX_NUMBER_DIGITS + 1), "0." + "5" * MAX_NUMBER_DIGITS])
def test_a_number_longer_than_the_bound_is_refused(number: str) -> None:
    with pytest.raises(JsonBoundsError, match=f"longer than the limit of {MAX_NUMBER_DIGITS}"):
        loads_strict(f'{{"n": {number}}}')
    assert loads_strict("9" * MAX_NUMBER_DIGITS) == int("9" * MAX_NUMBER_DIGITS)


def _file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    return path


def test_lines_come_numbered_and_blank_ones_are_skipped(tmp_path: Path) -> None:
    path = _file(tmp_path, b'{"a": 1}\n\n   \n{"b": "\xc3\xa9"}\n')
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (4, {"b": "é"})]


def test_a_bad_line_raises_naming_it_or_is_collected_with_the_others(tmp_path: Path) -> None:
    path = _file(tmp_path, b'{"a": 1}\n[1, 2]\n{"a": 1, "a": 2}\nnot json\n')
    with pytest.raises(RecordError, match=rf"^{path} line 2: expected a JSON object, got list$"):
        list(read_jsonl(path))
    problems: list[str] = []
    assert list(read_jsonl(path, problems=problems)) == [(1, {"a": 1})]
    assert [problem.split(": ", 1)[0] for problem in problems] == [
        f"{path} line 2",
        f"{path} line 3",
        f"{path} line 4",
    ]
    assert "key 'a' appears twice" in problems[1] and "invalid JSON" in problems[2]


def test_a_file_not_in_utf8_is_refused_naming_the_line_and_byte(tmp_path: Path) -> None:
    latin = _file(tmp_path, b'{"a": 1}\n{"b": "caf\xe9"}\n')
    with pytest.raises(RecordError, match=r"line 2: not UTF-8 text \(byte 0xe9 at byte 11"):
        list(read_jsonl(latin, problems=[]))  # always raised, even when collecting
    wide = _file(tmp_path, '{"a": 1}\n'.encode("utf-16"))
    with pytest.raises(RecordError, match="line 1: UTF-16 text"):
        list(read_jsonl(wide))


def test_an_unreadable_file_is_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"cannot read .*missing\.jsonl"):
        list(read_jsonl(tmp_path / "missing.jsonl", error=InvalidInputError))
