"""Text becomes the same searchable terms for documents and queries, on every backend."""

from __future__ import annotations

from collections import Counter

from affect_memory.memory.index.lexical.analyzer import (
    MAX_TERM_CHARS,
    STOP_WORDS,
    document_terms,
    query_terms,
    words,
)


def test_words_are_lower_cased_alphanumeric_runs_without_stop_words() -> None:
    assert words("What did Caroline RESEARCH at the LGBTQ+ support-group in 2023?") == [
        "carolin",
        "research",
        "lgbtq",
        "support",
        "group",
        "2023",
    ]


def test_english_stemming_joins_the_forms_a_question_and_a_memory_use() -> None:
    assert words("researched") == words("research") == words("researching")
    assert words("losing") == words("lose")
    assert words("hiking trips") == words("hike trip")


def test_accents_and_compatibility_forms_fold_and_underscores_split() -> None:
    assert words("Café Ｍünchen") == words("cafe munchen")
    assert words("snake_case") == ["snake", "case"]
    assert words("東京 tokyo") == ["東京", "tokyo"]


def test_a_blob_is_cut_to_the_longest_term() -> None:
    (term,) = words("x" * 500)
    assert len(term) <= MAX_TERM_CHARS


def test_only_stop_words_or_punctuation_give_no_terms() -> None:
    assert words("Where is it? Who was he, and how?") == []
    assert words("!!! ... ???") == []
    assert {"the", "who", "i"} <= STOP_WORDS and len(STOP_WORDS) == 60


def test_a_document_counts_every_term_and_a_query_keeps_each_once() -> None:
    counts, length = document_terms("The bees, the bees! I keep bees on the roof.")
    assert counts == Counter({"bee": 3, "keep": 1, "roof": 1}) and length == 5
    assert query_terms("bees bees roof Bees") == ["bee", "roof"]
