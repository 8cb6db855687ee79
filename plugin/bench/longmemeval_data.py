"""LongMemEval questions as users' memories, read by the measurement protocol.

LongMemEval (Wu et al., ICLR 2025) gives each question a haystack of timestamped
user-assistant sessions. The protocol (``../shared/data/longmemeval-dev/README.md``): one
question is one user (``user_id`` = the question id); every turn of every haystack session is
one memory, text ``"role: content"`` cut to the product's 4,096-character limit, timestamp its
session's date (read as UTC), id ``"<session_id>:<turn index>"``, and ``"<session_id>~2:..."``
for a session's second appearance in one haystack; ``now`` is the question's date; the
evidence is the turns marked ``has_answer``.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.models import MAX_TEXT_CHARS

__all__ = [
    "DEFAULT_DATA",
    "LongMemEvalQuestion",
    "LongMemEvalUser",
    "load_longmemeval",
    "session_time",
]

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "data"
    / "longmemeval-dev"
    / "longmemeval_s_dev.json.gz"
)
"""Where the dev subset lies beside the repository."""


@dataclass(frozen=True, slots=True)
class LongMemEvalQuestion:
    """A question, its type and the memory ids of its evidence turns."""

    text: str
    category: str
    """The question type (knowledge-update, temporal-reasoning, ...)."""
    evidence: tuple[str, ...]
    answer_sessions: tuple[str, ...]
    """The ids of the sessions that hold the answer (for session-level recall)."""


@dataclass(frozen=True, slots=True)
class LongMemEvalUser:
    """One question's haystack as a user's memories, and the question asked of them."""

    user_id: str
    records: tuple[dict[str, Any], ...]
    questions: tuple[LongMemEvalQuestion, ...]
    now: datetime


def session_time(text: object, where: str) -> datetime:
    """A LongMemEval date (``2023/05/20 (Sat) 02:21``) as a UTC instant."""
    try:
        raw = str(text)
        return datetime.strptime(raw[:10] + raw[-6:], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInputError(
            f"{where}: a date like '2023/05/20 (Sat) 02:21', got {shown(text)}"
        ) from None


def _user(question: Mapping[str, Any], sessions: Mapping[str, Any], where: str) -> LongMemEvalUser:
    ident = str(question["question_id"])
    ids = question["haystack_session_ids"]
    dates = question["haystack_dates"]
    if len(ids) != len(dates):
        raise InvalidInputError(f"{where}: {len(ids)} haystack sessions but {len(dates)} dates")
    seen: Counter[str] = Counter()
    records: list[dict[str, Any]] = []
    evidence: list[str] = []
    for session, date in zip(ids, dates, strict=True):
        if session not in sessions:
            raise InvalidInputError(f"{where}: session {shown(session)} is not in the file")
        seen[session] += 1
        key = session if seen[session] == 1 else f"{session}~{seen[session]}"
        stamp = session_time(date, f"{where} session {session}").isoformat()
        for index, turn in enumerate(sessions[session]):
            memory_id = f"{key}:{index}"
            text = f"{turn['role']}: {turn['content']}"[:MAX_TEXT_CHARS]
            records.append({"id": memory_id, "text": text, "user_id": ident, "timestamp": stamp})
            if turn.get("has_answer"):
                evidence.append(memory_id)
    asked = LongMemEvalQuestion(
        str(question["question"]),
        str(question["question_type"]),
        tuple(evidence),
        tuple(str(session) for session in question.get("answer_session_ids", ())),
    )
    now = session_time(question["question_date"], f"{where} question_date")
    return LongMemEvalUser(ident, tuple(records), (asked,), now)


def load_longmemeval(
    path: Path, *, types: Sequence[str] = (), limit: int | None = None
) -> list[LongMemEvalUser]:
    """The questions of a LongMemEval file (``.json`` or ``.json.gz``) that have evidence
    turns, each as a user, optionally only ``types`` and the first ``limit`` of them."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"cannot read the LongMemEval file {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise InvalidInputError(f"{path}: not a LongMemEval file (no 'questions' list)")
    sessions = data.get("sessions")
    if not isinstance(sessions, dict):
        raise InvalidInputError(f"{path}: not a LongMemEval file (no 'sessions' object)")
    users = []
    for number, question in enumerate(data["questions"]):
        if types and question.get("question_type") not in types:
            continue
        try:
            user = _user(question, sessions, f"{path} question {number}")
        except KeyError as error:
            raise InvalidInputError(f"{path} question {number}: no {error}") from None
        if user.questions[0].evidence:
            users.append(user)
        if limit is not None and len(users) >= limit:
            break
    if not users:
        raise InvalidInputError(f"{path}: no question with evidence turns")
    return users
