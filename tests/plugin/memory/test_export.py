"""Listing and exporting: pages checked and read in order to the last short one, each record
a JSON line that reads back as the same record (the round trip through a store is
``test_data_rights.py``'s)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.export import (
    MAX_LIST_LIMIT,
    check_page,
    exported_records,
    record_line,
    write_jsonl,
)
from affect_memory.memory.records import MemoryRecord

STAMP = "2025-03-01T12:00:00Z"


def _record(ident: str, **fields: object) -> MemoryRecord:
    base = {"id": ident, "text": f"note {ident}", "user_id": "ann", "timestamp": STAMP}
    return MemoryRecord.model_validate(base | fields)


@pytest.mark.parametrize(
    ("limit", "offset", "message"),
    [
        (0, 0, "limit"),
        (MAX_LIST_LIMIT + 1, 0, "limit"),
        (True, 0, "limit"),
        ("5", 0, "limit"),
        (5, -1, "offset"),
        (5, False, "offset"),
        (5, 1.0, "offset"),
    ],
)
def test_a_page_outside_the_bounds_is_refused(limit: object, offset: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^{message} must be an integer"):
        check_page(limit, offset)


def test_the_bounds_are_pages() -> None:
    assert check_page(1, 0) == (1, 0)
    assert check_page(MAX_LIST_LIMIT, 10**9) == (MAX_LIST_LIMIT, 10**9)


@pytest.mark.parametrize("total", [0, 3, 4, 9])
def test_every_page_is_read_once_in_order_up_to_the_short_one(total: int) -> None:
    ids = [f"m{i}" for i in range(total)]
    asked: list[tuple[int, int]] = []

    def page(limit: int, offset: int) -> Sequence[str]:
        asked.append((limit, offset))
        return ids[offset : offset + limit]

    lines = list(exported_records(page, lambda got: [_record(i) for i in got], size=3))
    assert [line["id"] for line in lines] == ids
    assert asked == [(3, offset) for offset in range(0, total + 1, 3)]


def test_a_line_reads_back_as_the_same_record_with_its_extras_sorted() -> None:
    record = _record(
        "m1",
        recall_count=2,
        last_recalled_at="2025-04-01T00:00:00Z",
        extra={"zeta": 1, "alpha": "é"},
    )
    line = record_line(record)
    assert list(line["extra"]) == ["alpha", "zeta"]
    assert MemoryRecord.model_validate(line) == record
    assert "extra" not in record_line(_record("m2")) and "agent_id" not in record_line(record)
    out = io.StringIO()
    assert write_jsonl([line, record_line(_record("m2"))], out) == 2
    written = out.getvalue().splitlines()
    assert [json.loads(text)["id"] for text in written] == ["m1", "m2"]
    assert "é" in written[0] and ", " not in written[0]  # UTF-8 as is, compact


def test_a_line_json_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        write_jsonl([{"score": float("nan")}], io.StringIO())
