"""When a message asks for memory: questions, references to the past, and retrieval intents.

English cue lists, replaceable as a whole (``RetrievalRule``). Two rooms read them, so they sit
below both: the intent gate (``affect_memory.gate``, whether a turn retrieves) and the turn's
memory writes (``affect_memory.memory.turns.effects``, which sentences are questions and are
not stored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_RETRIEVAL_RULE", "RetrievalRule"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_QUESTION_WORDS = _words(
    "what what's whats why how how's hows where where's who who's whom whose which"
)
"""Wh-words that open a question on their own ("when" is left out: it mostly opens a clause)."""

_AUXILIARIES = _words(
    "do does did is are am was were can could would will should shall may have has"
)
"""Verbs that open a question when a subject follows ("can you ...", not "can't talk")."""

_SUBJECTS = _words(
    "you u ya i we they he she it there this that these those my your our his her their "
    "anyone anybody someone somebody anything"
)
"""Words that, right after an auxiliary, make the message a question ("is it ...", "do you ...")."""

_REQUESTS = ("tell me", "explain", "any idea", "any ideas", "i wonder", "i'm curious", "im curious")
"""Openers that ask for information without a question mark."""

_PAST_REFERENCE = re.compile(
    r"\b(?:"
    r"remember|remembered|recall|remind|reminded|"
    r"last\s+(?:time|night|week|weekend|month|year|summer|winter|spring|fall|autumn|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"yesterday|the\s+other\s+day|earlier|previously|ago|again|still|used\s+to|"
    r"back\s+(?:when|then)|(?:you|i|we)\s+(?:said|told|mentioned|suggested|recommended|promised)|"
    r"did\s+i\s+(?:tell|mention|say)|we\s+(?:talked|spoke|discussed|chatted)|"
    r"our\s+(?:last\s+)?(?:conversation|chat|talk)|as\s+(?:i|we|you)\s+(?:said|mentioned)|"
    r"like\s+i\s+said|mentioned"
    r")\b",
    re.IGNORECASE,
)
"""English cues that a message leans on something said or lived before."""


@dataclass(frozen=True, kw_only=True)
class RetrievalRule:
    """When the gate asks for memory retrieval: questions, past references, retrieval intents.

    Generic past tense is deliberately not a cue: "-ed" words are in most messages and would
    make nearly every turn retrieve.
    """

    questions: bool = True
    """Retrieve for a question: a ``?``, a wh-word, an auxiliary + subject, or a request opener."""
    question_words: frozenset[str] = _QUESTION_WORDS
    auxiliaries: frozenset[str] = _AUXILIARIES
    subjects: frozenset[str] = _SUBJECTS
    requests: tuple[str, ...] = _REQUESTS
    past_references: bool = True
    """Retrieve when ``past_reference`` matches (remember, last time, yesterday, you said ...)."""
    past_reference: re.Pattern[str] = _PAST_REFERENCE
    intents: frozenset[str] = frozenset({"VULNERABILITY", "CURIOSITY"})
    """Intents that retrieve on their own, at confidence >= ``GateParams.retrieve_threshold``."""

    def is_question(self, text: str) -> bool:
        """Whether ``text`` reads as a question."""
        if "?" in text:
            return True
        words = re.findall(r"[^\W\d_][\w']*", text.lower().replace("’", "'"))
        if not words:
            return False
        if words[0] in self.question_words:
            return True
        if words[0] in self.auxiliaries and len(words) > 1 and words[1] in self.subjects:
            return True
        opening = " ".join(words[:3])
        return any(opening == r or opening.startswith(r + " ") for r in self.requests)

    def refers_to_past(self, text: str) -> bool:
        """Whether ``text`` refers to earlier conversation or past events."""
        return self.past_reference.search(text) is not None

    def decide(self, text: str, intent: str, confidence: float, threshold: float) -> bool:
        """Whether to retrieve for ``text`` classified as ``intent`` with ``confidence``."""
        if self.questions and self.is_question(text):
            return True
        if self.past_references and self.refers_to_past(text):
            return True
        return intent in self.intents and confidence >= threshold


DEFAULT_RETRIEVAL_RULE = RetrievalRule()
