"""A memory is indexed or removed whole: its row, postings, BM25 totals, ranked fields and
embedding move together; counts come from a write, or stay the index's on a resync."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.errors import StoreError
from affect_memory.memory.index.consistency.documents import (
    IndexedDoc,
    doc_from_record,
    doc_from_stored,
    embedding_bytes,
    ensure_user,
    put_docs,
    remove_docs,
    remove_user_docs,
    text_hash,
)
from affect_memory.memory.index.lexical.analyzer import document_terms
from affect_memory.memory.index.storage.backend import Backend
from affect_memory.memory.index.storage.opening import IndexTarget, open_backend
from affect_memory.memory.records import MAX_RECALL_COUNT, MemoryRecord

KEY = 5


def _record(ident: str, text: str, **fields: Any) -> MemoryRecord:
    return MemoryRecord.model_validate(
        {"id": ident, "text": text, "user_id": "ann", "timestamp": "2025-03-01T12:00:00Z"}
        | fields
    )


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    opened = open_backend(IndexTarget("file", path=tmp_path / "index.sqlite3"), lock_timeout=5)
    opened.write(lambda tx: ensure_user(tx, KEY, "memories.ann", "id-1", "ann"))
    try:
        yield opened
    finally:
        opened.close()


def _put(backend: Backend, *docs: IndexedDoc) -> None:
    backend.write(lambda tx: put_docs(tx, KEY, docs))


def _totals(backend: Backend) -> tuple[int, int]:
    row = backend.read(
        lambda tx: tx.one(
            "SELECT doc_count, total_length FROM index_users WHERE user_key = ?", (KEY,)
        )
    )
    assert row is not None
    return int(row[0]), int(row[1])


def _docs(backend: Backend) -> dict[str, tuple[Any, ...]]:
    """memory id -> (text hash, length, recall count, doc text, significance)."""
    rows = backend.read(
        lambda tx: tx.rows(
            "SELECT memory_id, text_hash, length, recall_count, doc_text, significance "
            "FROM index_docs WHERE user_key = ?",
            (KEY,),
        )
    )
    return {row[0]: tuple(row[1:]) for row in rows}


def _terms(backend: Backend) -> set[tuple[str, str]]:
    """(memory id, term) of every posting."""
    rows = backend.read(
        lambda tx: tx.rows(
            "SELECT d.memory_id, p.term FROM index_postings p JOIN index_docs d "
            "ON d.user_key = p.user_key AND d.doc_key = p.doc_key WHERE p.user_key = ?",
            (KEY,),
        )
    )
    return {(ident, term) for ident, term in rows}


def _length(text: str) -> int:
    return document_terms(text)[1]


# -- values -------------------------------------------------------------------------------------


def test_a_text_hash_tells_texts_apart_and_is_stable() -> None:
    assert text_hash("I keep bees.") == text_hash("I keep bees.")
    assert text_hash("I keep bees.") != text_hash("I keep bees!")
    assert len(text_hash("")) == 32 and int(text_hash("x"), 16) >= 0


def test_an_embedding_is_kept_as_the_narrowest_bytes_that_hold_its_values() -> None:
    narrow = np.array([0.5, -0.25, 1.0], dtype=np.float32)
    assert embedding_bytes(narrow.astype(np.float64).tolist()) == narrow.astype("<f4").tobytes()
    wide = [0.1, 0.2, 0.3]  # decimals a float32 cannot hold: an HTTP client's values
    kept = embedding_bytes(wide)
    assert kept is not None and np.frombuffer(kept, "<f8").tolist() == wide


@pytest.mark.parametrize(
    "value", [None, [], [[0.5]], [1, 2], ["0.5"], [0.5, float("nan")], [float("inf")], object()]
)
def test_anything_but_a_finite_vector_of_floats_is_no_embedding(value: object) -> None:
    assert embedding_bytes(value) is None


def test_a_written_record_brings_its_counts_and_chromas_fields() -> None:
    record = _record("m1", "bees", recall_count=3, last_recalled_at="2025-04-01T00:00:00Z")
    stored = record.to_metadata()
    doc = doc_from_record(record, stored, [0.5, 0.25])
    assert (doc.recall_count, doc.replace_counts, doc.epoch) == (3, True, record.timestamp_epoch)
    assert doc.last_recalled_at == "2025-04-01T00:00:00.000000+00:00"
    assert doc.ranked is not None and doc.ranked.owner == "ann"
    assert doc.embedding == np.array([0.5, 0.25], "<f4").tobytes()
    unread = doc_from_record(record, None)
    assert (unread.ranked, unread.tags, unread.embedding) == (None, None, None)


@pytest.mark.parametrize("count", [-1, 1.0, True, "2", MAX_RECALL_COUNT + 1, None])
def test_a_stored_count_that_is_no_count_reads_as_zero(count: object) -> None:
    meta = {**_record("m1", "bees").to_metadata(), "recall_count": count}
    assert doc_from_stored("m1", "bees", meta, replace_counts=False).recall_count == 0


def test_a_stored_row_keeps_only_a_whole_last_recall_and_real_turn_ids() -> None:
    meta = {
        **_record("m1", "bees").to_metadata(),
        "recall_count": 2,
        "last_recalled_at": "2025-04-01T00:00:00Z",
        "recall_turns": ["t1", "", 3, "t2"],
    }
    doc = doc_from_stored("m1", "bees", meta, replace_counts=False)
    assert (doc.recall_count, doc.turns, doc.last_recalled_at) == (2, ("t1", "t2"), None)
    assert doc_from_stored("m1", 7, None, replace_counts=True).text == ""


# -- rows ---------------------------------------------------------------------------------------


def test_adding_and_removing_memories_keeps_the_bm25_totals(backend: Backend) -> None:
    texts = {"m1": "bees on the roof", "m2": "a piano in the hall", "m3": "bees"}
    _put(backend, *(doc_from_record(_record(i, t), None) for i, t in texts.items()))
    assert _totals(backend) == (3, sum(map(_length, texts.values())))
    assert backend.write(lambda tx: remove_docs(tx, KEY, ["m1", "gone", "m1"])) == ["m1"]
    assert _totals(backend) == (2, _length(texts["m2"]) + _length(texts["m3"]))
    assert {ident for ident, _ in _terms(backend)} == {"m2", "m3"}
    assert backend.write(lambda tx: remove_docs(tx, KEY, ["gone"])) == []
    backend.write(lambda tx: remove_user_docs(tx, KEY))
    assert _totals(backend) == (0, 0) and _docs(backend) == {} and _terms(backend) == set()


def test_a_new_text_replaces_the_postings_and_the_length(backend: Backend) -> None:
    _put(backend, doc_from_record(_record("m1", "bees on the roof"), None))
    before = _terms(backend)
    _put(backend, doc_from_record(_record("m1", "a piano"), None))
    after = _terms(backend)
    assert after and not after & before
    assert _totals(backend) == (1, _length("a piano"))
    assert _docs(backend)["m1"][:2] == (text_hash("a piano"), _length("a piano"))


def test_the_last_write_of_an_id_in_one_call_wins(backend: Backend) -> None:
    _put(
        backend,
        doc_from_record(_record("m1", "bees"), None),
        doc_from_record(_record("m1", "a piano in the hall", recall_count=4), None),
    )
    assert _totals(backend) == (1, _length("a piano in the hall"))
    assert _docs(backend)["m1"][2] == 4


def test_a_resync_keeps_the_indexs_counts_and_a_write_replaces_them(backend: Backend) -> None:
    _put(backend, doc_from_record(_record("m1", "bees", recall_count=5), None))
    stored = _record("m1", "bees and wasps", recall_count=1).to_metadata()
    _put(backend, doc_from_stored("m1", "bees and wasps", stored, replace_counts=False))
    assert _docs(backend)["m1"][2] == 5  # the index is the authority for counts
    _put(backend, doc_from_record(_record("m1", "bees", recall_count=2), None))
    assert _docs(backend)["m1"][2] == 2


def test_ranked_fields_are_kept_only_for_the_users_own_rows(backend: Backend) -> None:
    own = _record("m1", "bees", significance=0.75)
    theirs = {**_record("m2", "piano").to_metadata(), "user_id": "bob"}
    _put(
        backend,
        doc_from_record(own, own.to_metadata()),
        doc_from_stored("m2", "piano", theirs, replace_counts=True),
    )
    docs = _docs(backend)
    assert docs["m1"][3:] == ("bees", pytest.approx(0.75))
    assert docs["m2"][3:] == (None, None)


def test_a_recreated_collection_starts_the_user_over(backend: Backend) -> None:
    _put(backend, doc_from_record(_record("m1", "bees"), None))
    assert not backend.write(lambda tx: ensure_user(tx, KEY, "memories.ann", "id-1", "ann"))
    assert _totals(backend) == (1, _length("bees"))
    assert backend.write(lambda tx: ensure_user(tx, KEY, "memories.ann", "id-2", "ann"))
    assert _totals(backend) == (0, 0) and _docs(backend) == {}
    with pytest.raises(StoreError, match="collide"):
        backend.write(lambda tx: ensure_user(tx, KEY, "memories.bob", "id-3", "bob"))


def test_a_write_for_a_user_without_a_row_is_refused(backend: Backend) -> None:
    doc = doc_from_record(_record("m1", "bees"), None)
    with pytest.raises(StoreError, match="no user row"):
        backend.write(lambda tx: put_docs(tx, KEY + 1, [doc]))
