"""The one mapper: Chroma's columns to checked rows, noise clamped, other users and other tools'
malformed rows refused or skipped by name."""

from __future__ import annotations

import numpy as np
import pytest

from affect_memory.errors import IsolationError, StoreError
from affect_memory.memory.chroma.rows import StoredRows, records_of, rows_from_query


def _columns(distances: list[float], owners: list[str]) -> tuple[list, list, list, list]:
    ids = [f"m{i}" for i in range(len(distances))]
    metas = [
        {
            "user_id": owner,
            "timestamp": "2026-06-01T12:00:00.000000+00:00",
            "timestamp_epoch": 1780315200.0,
            "significance": 0.5,
            "emotional_valence": 0.0,
            "recall_count": 0,
            "episode": False,
        }
        for owner in owners
    ]
    return ids, [f"text {i}" for i in ids], metas, distances


def _mapped(*columns: object) -> StoredRows:
    return rows_from_query(*columns)  # type: ignore[arg-type]


def test_the_mapper_clamps_float_noise_and_refuses_real_out_of_range_distances() -> None:
    rows = _mapped(*_columns([-2.4e-7, 2.0000004], ["u", "u"]), "u")
    assert rows.columns.distances.tolist() == [0.0, 2.0]
    for bad in (-0.01, 2.5, float("nan"), float("inf")):
        with pytest.raises(StoreError, match="outside the cosine range"):
            _mapped(*_columns([0.1, bad], ["u", "u"]), "u")


def test_the_mapper_refuses_a_row_of_another_user() -> None:
    with pytest.raises(IsolationError, match="'m1' of another user"):
        _mapped(*_columns([0.1, 0.2], ["ann", "anna"]), "ann")


def test_the_mapper_skips_rows_other_tools_wrote_naming_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids, docs, metas, dists = _columns([0.1, 0.2], ["u", "u"])
    lacking = {k: v for k, v in metas[0].items() if k != "recall_count"}
    with caplog.at_level("WARNING", logger="affect_memory.memory.chroma.rows"):
        rows = rows_from_query(ids, docs, [lacking, metas[1]], dists, "u")
    assert (rows.ids, rows.skipped) == (["m1"], ("m0",))
    assert "'m0'" in caplog.text and "recall_count" in caplog.text
    malformed = (
        ("recall_count", 1.0),
        ("recall_count", 2**53),
        ("episode", 1),
        ("significance", 1.5),
        ("significance", "high"),
        ("significance", True),
        ("timestamp_epoch", float("nan")),
        ("timestamp", 0),
    )
    for key, value in malformed:
        rows = rows_from_query(ids, docs, [{**metas[0], key: value}, metas[1]], dists, "u")
        assert (rows.ids, rows.skipped) == (["m1"], ("m0",)), (key, value)
        assert list(rows.columns.ids) == ["m1"]
    nothing_left = rows_from_query(ids[:1], docs[:1], [lacking], dists[:1], "u")
    assert (nothing_left.ids, nothing_left.skipped) == ([], ("m0",))
    with pytest.raises(StoreError, match="ragged"):
        _mapped(ids, docs, metas, [0.1], "u")
    assert len(_mapped([], [], [], [], "u")) == 0


def test_the_mapper_widens_chromas_float32_distances_to_float64_columns() -> None:
    rows = _mapped(*_columns(list(np.array([0.25], dtype=np.float32)), ["u"]), "u")
    assert rows.columns.distances.dtype == np.float64 and rows.columns.distances.tolist() == [0.25]


def test_records_of_refuses_a_row_of_another_user_like_the_query_mapper() -> None:
    ids, docs, metas, _ = _columns([0.1, 0.2], ["ann", "bob"])
    got = {"ids": ids, "documents": docs, "metadatas": metas}
    with pytest.raises(IsolationError, match="'m1' of another user for a read scoped to 'ann'"):
        records_of(got, "ann")
