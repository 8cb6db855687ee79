"""Recall's cue lexicons, one JSON file per language: data that the code reads, not code.

Each ``<language>.json`` holds the query analyser's words (``affect_memory.memory.recall.plan``),
the date words of the periods a query names (``affect_memory.memory.recall.periods``), the words
that report a change (``affect_memory.memory.recall.change_cues``) and the life domains with the
phrases that describe each (``affect_memory.memory.recall.life_topics``).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = ["load_lexicon"]


@cache
def load_lexicon(language: str) -> dict[str, Any]:
    """The lexicon of ``language`` as its JSON object; a language not shipped is refused."""
    try:
        text = resources.files(__package__).joinpath(f"{language}.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        raise InvalidInputError(f"no recall lexicon for language {shown(language)}") from None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise InvalidInputError(f"the recall lexicon {language!r} is not a JSON object")
    return data
