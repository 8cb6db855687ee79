"""Recall's cue lexicons, one JSON file per language: data that the code reads, not code.

Each ``<language>.json`` holds the query analyser's words (``affect_memory.memory.recall.plan``),
the date words of the periods a query names (``affect_memory.memory.recall.periods``), the words
that report a change (``affect_memory.memory.recall.change_cues``) and the life domains with the
phrases that describe each (``affect_memory.memory.recall.life_topics``). ``word_list`` is how
those readers take a word list, ``phrase_alternation`` and ``normal_phrase`` how they match one
and name what matched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = ["load_lexicon", "normal_phrase", "phrase_alternation", "word_list"]


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


def phrase_alternation(phrases: Sequence[str]) -> str:
    """A regular-expression alternation of whole words and phrases, longest first, any
    whitespace inside a phrase."""
    ordered = sorted(set(phrases), key=len, reverse=True)
    return "|".join(r"\s+".join(re.escape(part) for part in phrase.split()) for phrase in ordered)


def normal_phrase(text: str) -> str:
    """A matched word or phrase as a lexicon writes it: lower case, single spaces."""
    return " ".join(text.lower().split())


def word_list(data: Mapping[str, object], key: str, where: str) -> list[str]:
    """The list of non-empty strings a lexicon section ``where`` holds under ``key``; anything
    else is refused in one line naming both."""
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise InvalidInputError(
            f"{where}.{key} must be a list of non-empty strings, got {shown(value)}"
        )
    return list(value)
