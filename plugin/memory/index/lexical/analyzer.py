"""How text becomes search terms: words, folded and lower-cased, minus stop words, stemmed.

One analyzer serves documents and queries alike, in Python, so every backend indexes and
scores the same terms. A word is a run of Unicode letters and digits after NFKD folding with
accents dropped (``Café`` and ``cafe`` meet), lower-cased with ``casefold``, cut to
``MAX_TERM_CHARS``. English stop words (a short list of articles, pronouns, auxiliaries,
prepositions and wh-words) are dropped before stemming, and the rest go through the Snowball
English stemmer (Porter2: ``researched`` and ``research`` meet, so do ``lose`` and ``losing``).

``ANALYZER`` names this exact behaviour; an index records it, and a user indexed with another
analyzer is re-indexed from Chroma (see ``affect_memory.memory.index.consistency.sync``).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter

__all__ = ["ANALYZER", "MAX_TERM_CHARS", "STOP_WORDS", "document_terms", "query_terms", "words"]

ANALYZER = "words-nfkd-stop60-snowball-english-1"
"""The name of this analyzer, stored by the index; change it whenever any rule here changes."""

MAX_TERM_CHARS = 64
"""Longest term kept: longer runs (hashes, base64) are cut, so one blob cannot bloat the index."""

STOP_WORDS = frozenset(
    (
        "a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "about", "to",
        "from", "in", "on", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did",
        "have", "has", "had", "i", "you", "he", "she", "it", "we", "they", "me", "him", "her", "us",
        "them", "my", "your", "his", "its", "our", "their", "this", "that", "these", "those",
        "what", "which", "who", "whom", "when", "where", "why", "how",
    )
)
"""60 English function words that carry no topic (the list LoCoMo's BM25 baseline used)."""

_WORD = re.compile(r"[^\W_]+")
_STEMS: dict[str, str] = {}
_STEM_CACHE_MAX = 200_000
_local = threading.local()


def _stemmer() -> object:
    """This thread's Snowball stemmer (a stemmer object keeps state while it works)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return stemmer


def _stem(word: str) -> str:
    stem = _STEMS.get(word)
    if stem is None:
        stem = _stemmer().stemWord(word)  # type: ignore[attr-defined]
        if len(_STEMS) >= _STEM_CACHE_MAX:
            _STEMS.clear()
        _STEMS[word] = stem
    return stem


def _fold(text: str) -> str:
    """Lower-cased, with compatibility forms unfolded and accents dropped."""
    text = text.casefold()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words(text: str) -> list[str]:
    """The searchable terms of ``text`` in order: folded words, stop words dropped, stemmed."""
    return [
        _stem(word[:MAX_TERM_CHARS])
        for word in _WORD.findall(_fold(text))
        if word not in STOP_WORDS
    ]


def document_terms(text: str) -> tuple[Counter[str], int]:
    """A document's term frequencies and its length in terms (what BM25 normalises by)."""
    terms = words(text)
    return Counter(terms), len(terms)


def query_terms(text: str) -> list[str]:
    """A query's distinct terms in first-seen order (a repeated word counts once)."""
    return list(dict.fromkeys(words(text)))
