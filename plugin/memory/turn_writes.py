"""One committed turn's writes to a user's memories, applied once however often they replay.

Each memory the turn surfaced gets ``recall_count + 1`` (stopping at 2**53 - 1) and
``last_recalled_at`` once: the turn id is appended to the memory's ``recall_turns`` (the last
32 kept) and rows already carrying it are skipped. The turn's new memory (the user message,
with a deterministic id) is inserted if absent, so a late replay cannot reset counts later
turns added. Not atomic across processes: two writers recalling the same memory at once
through one server can lose an increment.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kernel.errors import InvalidInputError, shown
from plugin.memory.batches import validate_records
from plugin.memory.collections import UserCollections
from plugin.memory.records import MAX_RECALL_COUNT, MemoryRecord
from plugin.memory.results import TurnWriteReport, check_ids, check_user
from plugin.memory.rows import RecallMark, recall_marks
from plugin.memory.timestamps import normalize_timestamp
from plugin.memory.writes import BatchWriter, chunks

__all__ = ["RECALL_TURNS_KEPT", "apply_turn_writes"]

logger = logging.getLogger(__name__)

RECALL_TURNS_KEPT = 32
"""Applied turn ids remembered per memory, so replaying any recent turn is harmless."""


def apply_turn_writes(
    collections: UserCollections,
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
    incremented: list[str] = []
    applied: list[str] = []
    missing: list[str] = []
    skipped: list[str] = []
    if ids:
        if recalled_at is None:
            raise InvalidInputError("recalled_at is required when recalled_ids are given")
        when = normalize_timestamp(recalled_at, field="recalled_at")
        collection = collections.of(user_id, create=False)
        updates: list[tuple[str, dict[str, Any]]] = []
        marks: dict[str, RecallMark] = {}
        with collections.backend("update recalled memories"):
            if collection is not None:
                for chunk in chunks(ids, collections.max_batch):
                    got = collection.get(ids=list(chunk), include=["metadatas"])
                    marks.update(recall_marks(got))
            for ident in ids:
                mark = marks.get(ident)
                if mark is None:
                    missing.append(ident)
                    continue
                if turn_id in mark.turns:
                    applied.append(ident)
                    continue
                if mark.recall_count is None:
                    skipped.append(ident)
                    logger.warning(
                        "turn %s left memory %s of user %s unchanged: its stored "
                        "recall_count %s is malformed",
                        turn_id,
                        shown(ident),
                        shown(user_id),
                        shown(mark.stored_count),
                    )
                    continue
                updates.append(
                    (
                        ident,
                        {
                            "recall_count": min(mark.recall_count + 1, MAX_RECALL_COUNT),
                            "last_recalled_at": when.iso,
                            "last_recalled_epoch": when.epoch,
                            "recall_turns": [*mark.turns, turn_id][-RECALL_TURNS_KEPT:],
                        },
                    )
                )
            if collection is not None:
                for part in chunks(updates, collections.max_batch):
                    collection.update(
                        ids=[ident for ident, _ in part], metadatas=[meta for _, meta in part]
                    )
            incremented = [ident for ident, _ in updates]
    stored_new = False
    if record is not None:
        if replace_new:
            writer.upsert([record], progress=False)
            stored_new = True
        else:
            stored_new = writer.add([record], progress=False).written == 1
    return TurnWriteReport(
        tuple(incremented), tuple(applied), tuple(missing), stored_new, tuple(skipped)
    )
