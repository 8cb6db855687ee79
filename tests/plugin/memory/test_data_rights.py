"""A user's data rights on a real store: list a page, export losslessly, erase every trace.

Two users hold the same memory ids; each test runs over the embedded store's SQLite index and
a PostgreSQL index (a schema of its own)."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.batches import read_records
from affect_memory.memory.export import write_jsonl
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.data_rights_fixtures import (
    IDS,
    USER_A,
    USER_B,
    assert_no_trace,
    index_rows_of,
    index_setting,
    open_store,
    seed,
    segment_dirs,
    snapshot,
)

pytestmark = pytest.mark.parametrize("index_kind", ["sqlite", "postgresql"])


def test_export_then_ingest_into_an_empty_store_gives_identical_records_and_recall_counts(
    index_kind: str, tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "ann.jsonl"
    with (
        index_setting(index_kind, tmp_path) as index,
        open_store(tmp_path / "a", index, embedder) as memory,
        out.open("w", encoding="utf-8") as handle,
    ):
        seed(memory)
        before = snapshot(memory, USER_A)
        assert write_jsonl(memory.export(USER_A), handle) == len(IDS)
    assert before["m1"].recall_count == 2 and before["m2"].recall_count == 1
    assert before["m1"].last_recalled_at == "2026-05-02T11:00:00.123456+00:00"
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {line["user_id"] for line in lines} == {USER_A}
    with (
        index_setting(index_kind, tmp_path) as index,
        open_store(tmp_path / "b", index, embedder) as fresh,
    ):
        fresh.add(read_records(out))
        after = snapshot(fresh, USER_A)
        assert snapshot(fresh, USER_B) == {}
    assert after == before  # every field, the recall counts and times included


def test_list_pages_in_timestamp_then_id_order_without_overlap(
    index_kind: str, tmp_path: Path, embedder: Embedder
) -> None:
    with (
        index_setting(index_kind, tmp_path) as index,
        open_store(tmp_path / "a", index, embedder) as memory,
    ):
        seed(memory)
        whole = memory.list(USER_A, limit=1000)
        pages = [memory.list(USER_A, limit=2, offset=offset) for offset in (0, 2, 4, 6)]
        assert [r.id for page in pages for r in page] == [r.id for r in whole]
        assert [len(page) for page in pages] == [2, 2, 1, 0]
        order = [(r.timestamp_epoch, r.id) for r in whole]
        assert order == sorted(order)
        assert {r.id: r for r in whole} == snapshot(memory, USER_A)
        for bad in ({"limit": 0}, {"limit": 1001}, {"limit": True}, {"offset": -1}):
            with pytest.raises(InvalidInputError, match=next(iter(bad))):
                memory.list(USER_A, **bad)  # type: ignore[arg-type]


def test_erase_removes_every_trace_of_one_user_and_leaves_the_other_with_the_same_ids(
    index_kind: str, tmp_path: Path, embedder: Embedder
) -> None:
    path = tmp_path / "a"
    with index_setting(index_kind, tmp_path) as index:
        with open_store(path, index, embedder) as memory:
            seed(memory)
            kept = snapshot(memory, USER_B)
            segments = segment_dirs(path, memory, USER_A)
            assert segments and all(segment.is_dir() for segment in segments)
            assert sum(index_rows_of(memory, USER_A).values()) > 0
            report = memory.erase_user(USER_A)
            assert (report.memories, report.collection_dropped) == (len(IDS), True)
            assert_no_trace(memory, USER_A)
            assert not any(segment.exists() for segment in segments)
            assert snapshot(memory, USER_B) == kept
            assert memory.stats().users == {USER_B: len(IDS)}
            hits = memory.recall("bees on the roof", USER_B, now="2026-06-01T00:00:00Z")
            assert {hit.id for hit in hits.results} <= set(IDS) and hits.results
            again = memory.erase_user(USER_A)  # nothing left: a no-op
            assert (again.memories, again.collection_dropped) == (0, False)
        with open_store(path, index, embedder) as reopened:
            assert_no_trace(reopened, USER_A)
            assert snapshot(reopened, USER_B) == kept
            reopened.add(
                [{"id": "m1", "text": "Back again.", "user_id": USER_A,
                  "timestamp": "2026-07-01T00:00:00Z"}]
            )  # fmt: skip
            assert [r.text for r in reopened.list(USER_A)] == ["Back again."]
            assert [r.id for r in reopened.recall("back again", USER_A).results] == ["m1"]


def test_async_twins_give_what_the_sync_calls_give(
    index_kind: str, tmp_path: Path, embedder: Embedder
) -> None:
    with (
        index_setting(index_kind, tmp_path) as index,
        open_store(tmp_path / "a", index, embedder) as memory,
    ):
        seed(memory)

        async def run() -> None:
            assert await memory.alist(USER_A, limit=3, offset=1) == memory.list(
                USER_A, limit=3, offset=1
            )
            assert list(await memory.aexport(USER_A)) == list(memory.export(USER_A))
            report = await memory.aerase_user(USER_A)
            assert report.memories == len(IDS)

        asyncio.run(run())
        assert_no_trace(memory, USER_A)
        assert len(snapshot(memory, USER_B)) == len(IDS)


def test_export_lines_are_json_objects_ingest_reads_back(
    index_kind: str, tmp_path: Path, embedder: Embedder
) -> None:
    with (
        index_setting(index_kind, tmp_path) as index,
        open_store(tmp_path / "a", index, embedder) as memory,
    ):
        seed(memory)
        buffer = io.StringIO()
        write_jsonl(memory.export(USER_B), buffer)
    out = tmp_path / "bob.jsonl"
    out.write_text(buffer.getvalue(), encoding="utf-8")
    records = read_records(out)
    assert [r.id for r in records] == sorted(IDS, key=lambda i: (records_epoch(records, i), i))
    assert {r.id: r.recall_count for r in records}["m3"] == 1


def records_epoch(records: tuple[object, ...], ident: str) -> float:
    """The timestamp epoch of the record ``ident``."""
    return next(r.timestamp_epoch for r in records if r.id == ident)  # type: ignore[attr-defined]
