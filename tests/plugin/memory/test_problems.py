"""Bad input as one line: a pydantic error names the field and the value, many problems are
joined with the first twenty shown and a count of the rest."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from affect_memory.errors import TimestampError
from affect_memory.memory.problems import MAX_PROBLEMS_SHOWN, explain_error, problems_message


class _Note(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    significance: float = 0.5
    when: str = "now"

    @field_validator("when")
    @classmethod
    def _known(cls, value: str) -> str:
        if value == "yesterday":
            raise TimestampError("when must name a moment, got 'yesterday'")
        if value == "never":
            raise ValueError("is no time at all")
        return value


def _explained(data: dict[str, object], fields: str | None = None) -> list[tuple[str, bool]]:
    with pytest.raises(ValidationError) as caught:
        _Note.model_validate(data)
    if fields is None:
        return [explain_error(error) for error in caught.value.errors()]
    return [explain_error(error, fields=fields) for error in caught.value.errors()]


def test_a_missing_field_and_an_unknown_key_are_named() -> None:
    assert _explained({"txt": "hi"}, fields="note field") == [
        ("text is required", False),
        ("txt is not a note field, got 'hi'", False),
    ]
    assert "is not a MemoryRecord field (custom metadata goes under 'extra')" in (
        _explained({"text": "hi", "colour": "red"})[0][0]
    )


def test_a_wrong_value_is_a_phrase_with_the_value() -> None:
    [(line, timestamp)] = _explained({"text": "hi", "significance": "high"})
    assert line.startswith("significance: input should be a valid number")
    assert line.endswith(", got 'high'") and not timestamp


def test_a_timestamp_error_is_passed_on_as_it_is_and_flagged() -> None:
    assert _explained({"text": "hi", "when": "yesterday"}) == [
        ("when must name a moment, got 'yesterday'", True)
    ]
    assert _explained({"text": "hi", "when": "never"}) == [("when is no time at all", False)]


def test_an_error_without_a_location_is_the_records() -> None:
    assert explain_error({"type": "missing"}) == ("record is required", False)


def test_one_problem_is_itself_and_many_are_counted() -> None:
    assert problems_message(["a is bad"]) == "a is bad"
    assert problems_message(["a", "b", "c"]) == "a; b; c (3 problems)"
    shown = [f"p{i}" for i in range(MAX_PROBLEMS_SHOWN)]
    assert problems_message(shown) == "; ".join(shown) + f" ({MAX_PROBLEMS_SHOWN} problems)"
    many = [f"p{i}" for i in range(1020)]
    assert problems_message(many) == "; ".join(many[:MAX_PROBLEMS_SHOWN]) + (
        "; and 1,000 more (1,020 problems)"
    )
