"""What a memory's text says about change: whether it reports that something of the user's changed.

An update is worded as a change ("I moved to Berlin", "I switched from mate to chamomile",
"I no longer smoke", "now I swim instead"), while the fact it replaces was stated plainly ("I
live in Lisbon"). So for a question about the present, a memory that reports a change is the
likelier answer, and the current-state rule gives its relevance a small gain
(the settings' ``change_gain``, ``affect_memory.memory.recall.time_rule.state_similarity``).

``CHANGE_CUES`` (the lexicon's ``change_cues``, ``affect_memory.memory.recall.lexicon``) is generic
English: a move or switch (moved, relocated, switched, changed), an
end (quit, stopped, left, sold, gave up, got rid of, broke up, split up, retired, no longer,
anymore), a start (started, took up, adopted, joined, bought, new), or a present contrast
(now, nowadays, these days, instead, since). No topics, names or dataset phrases.
"""

from __future__ import annotations

import re
from functools import lru_cache

from affect_memory.memory.recall.lexicon import load_lexicon

__all__ = ["CHANGE_CUES", "change_word"]

CHANGE_CUES = frozenset(load_lexicon("en")["change_cues"])
"""The words and two-word phrases that report a change of the writer's state."""

_SINGLE = frozenset(cue for cue in CHANGE_CUES if " " not in cue)
_PAIRS: dict[str, frozenset[str]] = {
    first: frozenset(cue.split()[1] for cue in CHANGE_CUES if cue.split()[0] == first)
    for first in {cue.split()[0] for cue in CHANGE_CUES if " " in cue}
}
_LETTERS = re.compile(r"[^\W\d_]+")
"""A word is a run of letters (any script), so "snow" or "renewed" hold no "now" or "new"."""


@lru_cache(maxsize=1 << 16)
def _first_cue(text: str) -> str | None:
    words: list[str] = _LETTERS.findall(text.lower())
    for index, word in enumerate(words):
        if word in _SINGLE:
            return word
        follows = _PAIRS.get(word)
        if follows is not None and index + 1 < len(words) and words[index + 1] in follows:
            return f"{word} {words[index + 1]}"
    return None


def change_word(text: str | None) -> str | None:
    """The first change cue in ``text`` (lower-cased, one space between words), or None.

    Results are cached by text: recall asks it of the same memories query after query.
    """
    if not text:
        return None
    found: str | None = _first_cue(text)
    return found
