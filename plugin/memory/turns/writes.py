"""One committed turn's writes to a user's memories, applied once however often they replay.

Each memory the turn surfaced gets ``recall_count + 1`` (stopping at 2**53 - 1) and its
``last_recalled_at`` moved forward to the turn's time, once per (memory, turn id): the
counts live in the memory index (``affect_memory.memory.index.consistency.rehearsal``), whose
unique keys and atomic updates make that exact across processes and hosts, where Chroma (no
compare-and-set) lost increments. A surfaced memory the index does not hold yet (another worker's
add, in Chroma but not yet settled) is counted once it is indexed, not dropped. Chroma keeps the
ingest-time values. The turn's new memory (the user
message, with a deterministic id) is inserted if absent, through the index's journal, so a
late replay cannot reset counts later turns added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.batches import validate_records
from affect_memory.memory.chroma.writes import BatchWriter
from affect_memory.memory.index.memory_index import MemoryIndex
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import TurnWriteReport, check_ids, check_user
from affect_memory.memory.timestamps import normalize_timestamp

__all__ = ["apply_turn_writes"]


def apply_turn_writes(
    index: MemoryIndex,
    writer: BatchWriter,
    turn_id: str,
    *,
    user_id: str,
    recalled_ids: Sequence[str] = (),
    recalled_at: str | datetime | float | None = None,
    new_record: MemoryRecord | Mapping[str, Any] | None = None,
    replace_new: bool = False,
) -> TurnWriteReport:
    """Apply one committed turn's memory writes to ``user_id``'s memories, once per turn id.

    ``replace_new=True`` overwrites the new memory instead of inserting it if absent.
    """
    if not isinstance(turn_id, str) or not 1 <= len(turn_id) <= 256:
        raise InvalidInputError(f"turn_id must be a 1-256 character string, got {shown(turn_id)}")
    user_id = check_user(user_id)
    ids = check_ids(recalled_ids, "recalled_ids")
    record = None
    if new_record is not None:
        record = validate_records([new_record], label="new_record")[0]
        if record.user_id != user_id:
            raise InvalidInputError(
                f"new_record belongs to user {shown(record.user_id)}, but the turn writes "
                f"are for user {shown(user_id)}"
            )
    incremented: tuple[str, ...] = ()
    applied: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    if ids:
        if recalled_at is None:
            raise InvalidInputError("recalled_at is required when recalled_ids are given")
        when = normalize_timestamp(recalled_at, field="recalled_at")
        outcome = index.record_recalls(user_id, turn_id, ids, epoch=when.epoch, iso=when.iso)
        incremented, applied, missing = outcome.incremented, outcome.already, outcome.missing
    stored_new = False
    if record is not None:
        if replace_new:
            writer.upsert([record], progress=False)
            stored_new = True
        else:
            stored_new = writer.add([record], progress=False).written == 1
    return TurnWriteReport(incremented, applied, missing, stored_new, ())
