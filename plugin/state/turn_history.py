"""Each conversation's history turn by turn: the mood and emotions after every committed turn.

Beside the transcript, both state stores keep one ``turn_affect`` row per committed turn,
written in the turn's own commit, so the history has a row for a turn exactly when the
transcript has the turn. A row names the turn's user message (by its ``seq``) and holds the PAD
mood and the emotions the committed state carries after the turn (``AffectState.occ_carry``:
the turn's emotions above the carry floor). Every user message a commit carries starts a turn
(an engine turn carries one); a commit without a state (a silent turn) leaves the state as it
was, so its row holds no mood of its own and reading gives it the mood of the turn before.

Reading pairs each user message with the assistant messages after it, and answers only the
user the conversation belongs to (``affect_memory.state.user_links``). ``ConversationHistory``
is what a store offers for this; the kernel's ``StateStore`` knows nothing of users.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from affect_memory.kernel.errors import CorruptStateError, shown
from affect_memory.kernel.models import AffectState, EmotionMap, Mood
from affect_memory.kernel.protocols import Message

__all__ = [
    "ConversationHistory",
    "ConversationSummary",
    "ConversationTurn",
    "TurnAffect",
    "assemble_turns",
    "turn_affect_rows",
]


@dataclass(frozen=True, slots=True)
class TurnAffect:
    """One ``turn_affect`` row a commit writes, before the store knows its message's ``seq``."""

    back: int
    """How many of the commit's messages come after the turn's user message: its ``seq`` is
    the conversation's newest ``seq`` minus this, once the commit's messages are inserted."""
    mood: tuple[float, float, float] | None
    """Pleasure, arousal and dominance after the turn; None when the commit keeps the state."""
    emotions: str | None
    """The carried emotions as JSON; None when the commit keeps the state."""


def turn_affect_rows(messages: Sequence[Message], state: AffectState | None) -> list[TurnAffect]:
    """The rows a commit of ``messages`` and ``state`` (None keeps the old) writes: one per
    user message."""
    if state is None:
        mood, emotions = None, None
    else:
        mood = (state.mood.valence, state.mood.arousal, state.mood.dominance)
        emotions = json.dumps(dict(state.occ_carry), sort_keys=True)
    last = len(messages) - 1
    return [
        TurnAffect(last - index, mood, emotions)
        for index, message in enumerate(messages)
        if message.role == "user"
    ]


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One conversation of a user, as a listing shows it."""

    conversation_id: str
    turns: int
    """Committed turns: the user messages of its transcript."""
    updated_at: str | None
    """When it last changed: its newest message's timestamp, else when its state was
    written; None when it holds neither (a conversation claimed but never committed)."""


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One committed turn: what the user said, the reply, and the affect after it."""

    index: int
    """The turn's position in the conversation, from 0."""
    timestamp: str
    """The user message's timestamp (an engine stamps the reply with the same one)."""
    user: str
    assistant: str | None
    """The reply; None for a turn that was not answered (silent, or appraisal only)."""
    mood: Mood | None
    """The PAD mood after the turn; None when the store has no history for it (a turn
    committed before the history existed, or a silent first turn)."""
    emotions: Mapping[str, float] = field(default_factory=dict)
    """The emotions the state carries after the turn (empty when ``mood`` is None)."""


@runtime_checkable
class ConversationHistory(Protocol):
    """A state store that lists a user's conversations, reads one turn by turn, and claims a
    new one for a user."""

    async def conversations(self, user_id: str) -> tuple[ConversationSummary, ...]:
        """The conversations linked to ``user_id``, by conversation id."""
        ...

    async def conversation_turns(
        self, user_id: str, conversation_id: str
    ) -> tuple[ConversationTurn, ...] | None:
        """The turns of ``conversation_id`` in order; None unless it belongs to ``user_id``."""
        ...

    async def claim_conversation(self, conversation_id: str, user_id: str) -> bool:
        """Link ``conversation_id`` to ``user_id`` before a turn; False (nothing written) when
        it belongs to another user, or holds turns and belongs to nobody."""
        ...


_MessageRow = tuple[Any, ...]
"""``(seq, role, content, timestamp, recorded, pleasure, arousal, dominance, emotions)``:
a message, whether a ``turn_affect`` row names it, and that row's values."""


def assemble_turns(
    conversation_id: str, rows: Iterable[_MessageRow]
) -> tuple[ConversationTurn, ...]:
    """The turns of a conversation's message rows in ``seq`` order, each user message
    starting one; a row that cannot be read raises ``CorruptStateError`` naming it.

    Assistant messages before the first user message belong to no turn and are left out.
    """
    turns: list[ConversationTurn] = []
    mood: Mood | None = None
    emotions: Mapping[str, float] = {}
    for seq, role, content, stamp, recorded, pleasure, arousal, dominance, carried in rows:
        if role == "assistant":
            if turns:
                last = turns[-1]
                reply = content if last.assistant is None else f"{last.assistant}\n{content}"
                turns[-1] = _replace_reply(last, reply)
            continue
        if not recorded:
            mood, emotions = None, {}  # before the history: nothing is known of it
        elif pleasure is not None:
            mood, emotions = _affect(conversation_id, seq, (pleasure, arousal, dominance), carried)
        turns.append(
            ConversationTurn(len(turns), str(stamp), str(content), None, mood, emotions)
        )
    return tuple(turns)


def _replace_reply(turn: ConversationTurn, reply: str) -> ConversationTurn:
    return ConversationTurn(
        turn.index, turn.timestamp, turn.user, reply, turn.mood, turn.emotions
    )


def _affect(
    conversation_id: str, seq: object, pad: tuple[object, object, object], carried: object
) -> tuple[Mood, Mapping[str, float]]:
    """A stored row's mood and emotions, checked as the kernel checks them."""
    where = f"the history of message {seq} of conversation {shown(conversation_id)}"
    try:
        mood = Mood(valence=pad[0], arousal=pad[1], dominance=pad[2])  # type: ignore[arg-type]
        emotions = EmotionMap(json.loads(carried))  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError) as error:
        line = " ".join(str(error).split())
        raise CorruptStateError(f"{where} cannot be read: {line}") from None
    return mood, dict(emotions)
