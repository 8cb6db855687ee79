"""What a memory's text says about change: whether it reports that something of the user's changed.

An update is worded as a change ("I moved to Berlin", "I switched from mate to chamomile",
"I no longer smoke", "now I swim instead"), while the fact it replaces was stated plainly ("I
live in Lisbon"). So for a question about the present, a memory that reports a change is the
likelier answer, and the current-state rule gives its relevance a small gain
(``plugin.memory.time_rule.CHANGE_GAIN``).

``CHANGE_CUE`` is generic English: a move or switch (moved, relocated, switched, changed), an
end (quit, stopped, left, sold, gave up, got rid of, broke up, split up, retired, no longer,
anymore), a start (started, took up, adopted, joined, bought, new), or a present contrast
(now, nowadays, these days, instead, since). No topics, names or dataset phrases.
"""

from __future__ import annotations

import re

__all__ = ["CHANGE_CUE", "change_word"]

_WORDS = (
    "now", "nowadays", "these days", "since", "instead", "new", "anymore", "any more",
    "no longer", "switch", "switched", "changed", "moved", "relocated", "quit", "started",
    "stopped", "left", "sold", "bought", "gave up", "given up", "took up", "taken up",
    "got rid", "split up", "broke up", "retired", "adopted", "joined",
)  # fmt: skip

CHANGE_CUE = re.compile(
    r"\b(?:" + "|".join(word.replace(" ", r"\s+") for word in _WORDS) + r")\b", re.IGNORECASE
)
"""A word or phrase that reports a change of the writer's state."""


def change_word(text: str | None) -> str | None:
    """The first change cue in ``text``, lower-cased and with single spaces, or None."""
    if not text:
        return None
    found = CHANGE_CUE.search(text)
    return None if found is None else " ".join(found.group(0).lower().split())
