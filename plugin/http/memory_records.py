"""The API's memory object: a posted record checked as ``MemoryRecord``, a stored one rendered.

The API names two fields as people say them: ``valence`` is the record's ``emotional_valence``
and ``metadata`` its custom scalars (``extra``). A posted batch is checked whole by the
record's own validators before anything is written; every problem is listed, each as
``records[i].field`` followed by the validator's own words (the words ``ingest`` and the
Python API use), and the first names the problem's ``field``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from affect_memory.http.problems import ProblemError
from affect_memory.kernel.errors import shown
from affect_memory.memory.problems import explain_error, problems_message
from affect_memory.memory.records import MemoryRecord

__all__ = ["MAX_RECORDS", "RECORD_FIELDS", "memory_json", "parse_records"]

MAX_RECORDS = 1000
"""Most records one request may post."""

RECORD_FIELDS = (
    "id",
    "text",
    "timestamp",
    "significance",
    "valence",
    "episode",
    "agent_id",
    "conversation_id",
    "metadata",
)
"""The fields of a posted record: ``text`` is required; ``id`` defaults to a new random id and
``timestamp`` to the time of the request."""

_STORED = {"valence": "emotional_valence", "metadata": "extra"}
_SHOWN = {stored: shown_name for shown_name, stored in _STORED.items()}


def _problems(index: int, error: ValidationError) -> list[tuple[str, str]]:
    """Each validation problem of record ``index`` as (field, detail) in the API's names."""
    found: list[tuple[str, str]] = []
    for item in error.errors():
        phrase, _ = explain_error(item)
        loc = [str(part) for part in item.get("loc", ())]
        stored = ".".join(loc)
        if loc:
            loc[0] = _SHOWN.get(loc[0], loc[0])
        field = f"records[{index}]" + "".join(f".{part}" for part in loc)
        rest = phrase[len(stored) :] if stored and phrase.startswith(stored) else f": {phrase}"
        found.append((field, f"{field}{rest}"))
    return found


def parse_records(value: object, user_id: str, *, now: datetime) -> list[MemoryRecord]:
    """The records of a request's ``records`` list, all of ``user_id``; ``ProblemError(422)``
    lists every problem of the batch (nothing is written)."""
    if not isinstance(value, list):
        raise ProblemError(
            422, f"records must be a list of memory objects, got {shown(value)}", field="records"
        )
    if not value:
        raise ProblemError(422, "records must hold at least one memory, got []", field="records")
    if len(value) > MAX_RECORDS:
        raise ProblemError(
            422,
            f"records may hold at most {MAX_RECORDS:,} memories per request, got {len(value):,}",
            field="records",
        )
    problems: list[tuple[str, str]] = []
    records: list[MemoryRecord] = []
    first_of: dict[str, int] = {}
    stamp = now.isoformat()
    for index, item in enumerate(value):
        where = f"records[{index}]"
        if not isinstance(item, dict):
            problems.append((where, f"{where} must be a memory object, got {shown(item)}"))
            continue
        unknown = [key for key in item if key not in RECORD_FIELDS]
        if unknown:
            field = f"{where}.{unknown[0]}"
            problems.append(
                (
                    field,
                    f"{field} is not a memory field (known: {', '.join(RECORD_FIELDS)}), got "
                    f"{shown(item[unknown[0]])}",
                )
            )
            continue
        fields = {_STORED.get(key, key): entry for key, entry in item.items()}
        fields.setdefault("id", uuid.uuid4().hex)
        fields.setdefault("timestamp", stamp)
        try:
            record = MemoryRecord.model_validate({**fields, "user_id": user_id})
        except ValidationError as error:
            problems.extend(_problems(index, error))
            continue
        if record.id in first_of:
            field = f"{where}.id"
            problems.append(
                (field, f"{field} {shown(record.id)} repeats records[{first_of[record.id]}].id")
            )
            continue
        first_of[record.id] = index
        records.append(record)
    if problems:
        raise ProblemError(
            422, problems_message([detail for _, detail in problems]), field=problems[0][0]
        )
    return records


def memory_json(record: MemoryRecord) -> dict[str, Any]:
    """A stored memory as the API shows it (``valence`` and ``metadata`` in the API's names)."""
    return {
        "id": record.id,
        "text": record.text,
        "timestamp": record.timestamp,
        "significance": record.significance,
        "valence": record.emotional_valence,
        "episode": record.episode,
        "agent_id": record.agent_id,
        "conversation_id": record.conversation_id,
        "recall_count": record.recall_count,
        "last_recalled_at": record.last_recalled_at,
        "metadata": dict(sorted(record.extra.items())),
    }
