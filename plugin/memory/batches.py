"""Records from what a caller or a file gives: a whole batch checked before anything is written.

Every problem of a batch is listed, each naming where it is (the record's index, or a file and
line), the field and the bad value, and a (user, id) pair may appear once: Chroma refuses a
batch that repeats an id, while the same id under two users is two memories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, ValidationError

from affect_memory.errors import RecordError, TimestampError
from affect_memory.jsonl import read_jsonl
from affect_memory.kernel.errors import shown
from affect_memory.memory.problems import explain_error, problems_message
from affect_memory.memory.records import MemoryRecord

__all__ = ["parse_record", "read_records", "record_problems", "validate_records"]

Problem = tuple[str, bool]
"""One problem's text, and whether it is a timestamp problem."""


def record_problems(
    value: object, *, where: str = "record"
) -> tuple[MemoryRecord | None, list[Problem]]:
    """The record ``value`` describes, or every problem it has (each naming ``where``, the
    field and the value, flagged when it is a timestamp problem)."""
    if isinstance(value, MemoryRecord):
        return value, []
    if not isinstance(value, Mapping):
        return None, [
            (
                f"{where}: expected a MemoryRecord or a mapping of its fields (id, text, "
                f"user_id, timestamp, ...), got {shown(value)}",
                False,
            )
        ]
    try:
        return MemoryRecord.model_validate(value), []
    except ValidationError as error:
        ident = value.get("id")
        label = f"{where} (id {shown(ident)})" if isinstance(ident, str) and ident else where
        found = [explain_error(item) for item in error.errors()]
        return None, [(f"{label}: {text}", is_time) for text, is_time in found]


def _raise(problems: list[Problem]) -> None:
    kind = TimestampError if all(is_time for _, is_time in problems) else RecordError
    raise kind(problems_message([text for text, _ in problems]))


def parse_record(value: object, *, where: str = "record") -> MemoryRecord:
    """A ``MemoryRecord`` from a record or a mapping; the error lists every problem, naming
    ``where``, the field and the value."""
    record, problems = record_problems(value, where=where)
    if record is None:
        _raise(problems)
    assert record is not None
    return record


def _checked(
    entries: Iterable[tuple[object, str, str]], report: Callable[[Problem], None]
) -> list[MemoryRecord]:
    """The records of ``(value, where, name)`` entries, reporting each problem in entry order;
    ``name`` is how a later repeat of the same (user, id) refers to the entry."""
    records: list[MemoryRecord] = []
    seen: dict[tuple[str, str], str] = {}
    for value, where, name in entries:
        record, found = record_problems(value, where=where)
        if record is None:
            for problem in found:
                report(problem)
            continue
        key = (record.user_id, record.id)
        if key in seen:
            report(
                (
                    f"{where}: id {shown(record.id)} of user {shown(record.user_id)} "
                    f"repeats {seen[key]}",
                    False,
                )
            )
            continue
        seen[key] = name
        records.append(record)
    return records


def validate_records(
    items: Iterable[object], *, label: str = "record", first: int = 0
) -> tuple[MemoryRecord, ...]:
    """Validate a whole batch before anything is written; the error lists every problem.

    Problems name ``label`` and the item's index (counted from ``first``).
    """
    if isinstance(items, Mapping | BaseModel):
        raise RecordError(
            f"expected a list of records, got one {type(items).__name__}; "
            "pass a list (e.g. add([record])) even for a single memory"
        )
    if isinstance(items, str | bytes):
        raise RecordError(f"expected a list of records, got a string: {shown(items)}")
    problems: list[Problem] = []
    records = _checked(
        (
            (item, f"{label} {index}", f"{label} {index}")
            for index, item in enumerate(items, start=first)
        ),
        problems.append,
    )
    if problems:
        _raise(problems)
    return tuple(records)


def read_records(path: Path) -> tuple[MemoryRecord, ...]:
    """Every record of a JSON Lines file, checked whole: ``RecordError`` lists every bad line
    in file order (by file and line number), and an empty file is refused."""
    problems: list[str] = []
    objects = [0]

    def entries() -> Iterator[tuple[object, str, str]]:
        # read_jsonl reports a line that is not a JSON object into ``problems`` as it reads,
        # so every problem stays in line order.
        for number, value in read_jsonl(path, problems=problems):
            objects[0] += 1
            yield value, f"{path} line {number}", f"line {number}"

    records = _checked(entries(), lambda problem: problems.append(problem[0]))
    if problems:
        raise RecordError(problems_message(problems))
    if not objects[0]:
        raise RecordError(f"{path}: no records (expected one JSON object per line)")
    return tuple(records)
