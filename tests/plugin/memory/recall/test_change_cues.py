"""A memory's text reports a change when it says what moved, ended or began, in plain words."""

from __future__ import annotations

import pytest

from affect_memory.memory.recall.change_cues import change_word


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("I moved to Berlin last week and I'm still unpacking boxes.", "moved"),
        ("I quit nursing and started a new job as a software tester.", "quit"),
        ("I sold the Honda and now cycle to work every day.", "sold"),
        ("Because of reflux I switched from mate to chamomile.", "switched"),
        ("I NO LONGER smoke.", "no longer"),
        ("These   days I spend my weekends rock climbing.", "these days"),
        ("Tom and I broke up, and I'm dating Priya now.", "broke up"),
        ("I live in Lisbon, in a small flat near the river.", None),
        ("My boyfriend is called Tom.", None),
        ("Snow fell on the renewed, well-known leftover lawn.", None),  # no cue inside a word
        ("", None),
        (None, None),
    ],
)
def test_the_first_change_cue_of_a_text(text: str | None, word: str | None) -> None:
    assert change_word(text) == word
