"""A pool's index facts as ranking reads them: members not read yet are bounded by the largest
count, and rows read later land at their members' places."""

from __future__ import annotations

import numpy as np

from affect_memory.memory.index.consistency.rehearsal import rehearsal_of
from affect_memory.memory.recall.members import MemberFacts
from affect_memory.memory.records import MAX_RECALL_COUNT


def _row(
    ident: str, count: int, epoch: float, text: str | None, *embedding: bytes
) -> tuple[object, ...]:
    """An index row as ``read_rows`` reads it with the ranked fields (``IndexRow``), and with
    ``embedding`` as it reads embeddings too."""
    stamp = None if text is None else "2026-05-01T00:00:00+00:00"
    fields = (text, stamp, 0.4, -0.5, 1)
    return (ident, count, 5.0, "1970-01-01T00:00:05+00:00", epoch, *fields, *embedding, 0)


def test_members_not_read_are_bounded_by_the_largest_count() -> None:
    facts = MemberFacts.none_read(3)
    assert facts.unread([2, 0]) == [2, 0]
    assert facts.ceiling_counts().tolist() == [MAX_RECALL_COUNT] * 3
    assert np.isnan(facts.epochs).all() and not facts.known.any()
    assert facts.texts == [None, None, None]


def test_rows_read_later_land_at_their_members_places() -> None:
    facts = MemberFacts.none_read(4)
    rows = {"b": _row("b", 7, 100.0, "bees"), "d": _row("d", 0, 200.0, None)}
    facts.fill([1, 3], rehearsal_of(["b", "d"], rows, fields=True))
    assert facts.read.tolist() == [False, True, False, True]
    assert facts.unread([0, 1, 2, 3]) == [0, 2]
    assert facts.ceiling_counts().tolist() == [MAX_RECALL_COUNT, 7, MAX_RECALL_COUNT, 0]
    assert facts.known.tolist() == [False, True, False, False]  # "d" lacks its text
    assert facts.texts == [None, "bees", None, None]
    assert facts.timestamps[1] == "2026-05-01T00:00:00+00:00"
    assert facts.significance[1] == 0.4 and facts.valences[1] == -0.5 and facts.episodes[1]
    np.testing.assert_array_equal(facts.epochs, [np.nan, 100.0, np.nan, 200.0])
    np.testing.assert_array_equal(facts.last_recalled, [np.nan, 5.0, np.nan, 5.0])
    facts.fill([0, 2], rehearsal_of(["a", "c"], {}, fields=True))  # neither held: count 0
    assert facts.read.all() and facts.ceiling_counts().tolist() == [0, 7, 0, 0]


def test_a_whole_read_pool_is_read_and_bounded_by_its_own_counts() -> None:
    rows = {"a": _row("a", 2, 50.0, "hives", b"\x00\x00\x80?")}
    facts = MemberFacts.of(rehearsal_of(["a", "gone"], rows, fields=True, embeddings=True))
    assert facts.read.all() and facts.unread([0, 1]) == []
    assert facts.ceiling_counts().tolist() == [2, 0]
    assert facts.known.tolist() == [True, False]
    assert facts.embeddings == [b"\x00\x00\x80?", None]
