"""LoCoMo read by its measurement protocol (the data folder's README): memories and questions.

* one conversation file is one user (``user_id`` = the file's stem); one turn is one memory:
  text ``"speaker: text"`` plus ``" [blip_caption]"`` when the turn has one, id its dialogue
  id (``D3:7``), timestamp its session's date-time read as UTC, the other fields at their
  defaults (significance 0.5, no episode, valence 0);
* ``now`` is the last session that has turns, plus one day;
* questions of categories 1-4 that have evidence, evidence ids normalised (``D:11:26`` ->
  ``D11:26``, ``D30:05`` -> ``D30:5``, split on ``;``, ``,`` and spaces); ids that name no
  turn are dropped, and so is a question left with no evidence.

The data is read where it lies (``../shared/data/locomo-dev`` beside the repository) and never
copied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = [
    "CATEGORIES",
    "LocomoConversation",
    "LocomoQuestion",
    "evidence_ids",
    "load_conversation",
    "load_locomo",
    "turn_id",
]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""The answerable question categories, as the dataset numbers them."""

_SESSION = re.compile(r"^session_(\d+)$")
_DIALOGUE = re.compile(r"^D:?(\d+):(\d+)$")


def turn_id(raw: str) -> str | None:
    """A dialogue id in one form (``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``), or
    None when ``raw`` is not one."""
    found = _DIALOGUE.match(raw.strip())
    if found is None:
        return None
    return f"D{int(found.group(1))}:{int(found.group(2))}"


def evidence_ids(evidence: Sequence[str]) -> list[str]:
    """The dialogue ids a question's evidence names, normalised, unique, in order."""
    ids: list[str] = []
    for item in evidence:
        for part in re.split(r"[;,\s]+", str(item)):
            ident = turn_id(part) if part else None
            if ident is not None and ident not in ids:
                ids.append(ident)
    return ids


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """An answerable question, its category and the memory ids holding its evidence."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    """One conversation as a user's memories, and the questions asked about them."""

    user_id: str
    records: tuple[dict[str, Any], ...]
    questions: tuple[LocomoQuestion, ...]
    now: datetime

    def epochs(self) -> dict[str, float]:
        """Each memory's timestamp in epoch seconds, by id."""
        return {
            record["id"]: datetime.fromisoformat(record["timestamp"]).timestamp()
            for record in self.records
        }


def _session_time(text: object, where: str) -> datetime:
    try:
        return datetime.strptime(str(text).strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInputError(
            f"{where}: a session date-time like '1:56 pm on 8 May, 2023', got {shown(text)}"
        ) from None


def load_conversation(path: Path) -> LocomoConversation:
    """One LoCoMo conversation file, read by the protocol."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"cannot read the LoCoMo file {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("qa"), list):
        raise InvalidInputError(f"{path}: not a LoCoMo conversation (no 'qa' list)")
    sessions = sorted(
        (int(found.group(1)), key) for key in data if (found := _SESSION.match(key))
    )
    records: list[dict[str, Any]] = []
    last: datetime | None = None
    for _, key in sessions:
        turns = data[key]
        if not turns:
            continue
        moment = _session_time(data.get(f"{key}_date_time"), f"{path} {key}_date_time")
        last = moment if last is None or moment > last else last
        for turn in turns:
            ident = turn_id(str(turn.get("dia_id", "")))
            if ident is None:
                raise InvalidInputError(f"{path} {key}: a turn without a dialogue id")
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [{turn['blip_caption']}]"
            records.append(
                {"id": ident, "text": text, "user_id": path.stem, "timestamp": moment.isoformat()}
            )
    if last is None:
        raise InvalidInputError(f"{path}: no session has turns")
    known = {record["id"] for record in records}
    questions = []
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = tuple(e for e in evidence_ids(qa.get("evidence") or []) if e in known)
        if evidence:
            questions.append(LocomoQuestion(str(qa["question"]), int(qa["category"]), evidence))
    return LocomoConversation(path.stem, tuple(records), tuple(questions), last + timedelta(days=1))


def load_locomo(
    directory: Path, *, conversations: Sequence[str] = (), questions: int | None = None
) -> list[LocomoConversation]:
    """Every conversation file of ``directory`` (or those named), each with at most
    ``questions`` of its questions (the first ones) when given."""
    if not directory.is_dir():
        raise InvalidInputError(f"--data {directory} is not a directory of LoCoMo files")
    paths = sorted(directory.glob("*.json"))
    if conversations:
        wanted = set(conversations)
        missing = sorted(wanted - {path.stem for path in paths})
        if missing:
            raise InvalidInputError(f"no LoCoMo conversation {', '.join(missing)} in {directory}")
        paths = [path for path in paths if path.stem in wanted]
    if not paths:
        raise InvalidInputError(f"no LoCoMo conversation files (*.json) in {directory}")
    loaded = [load_conversation(path) for path in paths]
    if questions is not None:
        loaded = [
            LocomoConversation(c.user_id, c.records, c.questions[:questions], c.now)
            for c in loaded
        ]
    return loaded
