"""Listing and exporting one user's memories: pages in a stable order, and lossless JSON lines.

A user's memories are listed oldest timestamp first, then by id (the memory index's order), so
pages never overlap or skip while nothing is written. An exported line is the record as
``affect-memory ingest`` reads it back (``read_records``), recall count and last-recalled time
included (the index's, the authoritative ones), so exporting a user and ingesting the file
into an empty store gives the same records and counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TextIO

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.records import MemoryRecord

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "EXPORT_PAGE",
    "MAX_LIST_LIMIT",
    "check_page",
    "exported_records",
    "record_line",
    "write_jsonl",
]

DEFAULT_LIST_LIMIT = 50
"""Memories one ``list`` call returns unless told otherwise."""

MAX_LIST_LIMIT = 1000
"""Most memories one ``list`` call returns."""

EXPORT_PAGE = 500
"""Memories an export reads per page (two index reads, ids then counts, and the Chroma gets
of those ids)."""


def check_page(limit: object, offset: object) -> tuple[int, int]:
    """``limit`` in [1, ``MAX_LIST_LIMIT``] and ``offset`` ≥ 0, both integers (not bool)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInputError(
            f"limit must be an integer in [1, {MAX_LIST_LIMIT}], got {shown(limit)}"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(f"offset must be an integer of at least 0, got {shown(offset)}")
    return limit, offset


def record_line(record: MemoryRecord) -> dict[str, Any]:
    """``record`` as one JSON-able object ``ingest`` reads back into the same record."""
    line = record.model_dump(mode="json", exclude_none=True)
    if line.get("extra"):
        line["extra"] = dict(sorted(line["extra"].items()))  # Chroma keeps no key order
    else:
        line.pop("extra", None)
    return line


def exported_records(
    ids_page: Callable[[int, int], Sequence[str]],
    fetch: Callable[[Sequence[str]], Sequence[MemoryRecord]],
    *,
    size: int = EXPORT_PAGE,
) -> Iterator[dict[str, Any]]:
    """Every memory, page by page: ``ids_page(limit, offset)`` names a page's ids in order and
    ``fetch`` reads their records; each is yielded as a ``record_line`` object."""
    offset = 0
    while True:
        ids = ids_page(size, offset)
        for record in fetch(ids):
            yield record_line(record)
        if len(ids) < size:
            return
        offset += size


def write_jsonl(lines: Iterable[dict[str, Any]], out: TextIO) -> int:
    """Write each object as one JSON line to ``out``; how many were written."""
    written = 0
    for line in lines:
        out.write(json.dumps(line, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
        out.write("\n")
        written += 1
    return written
