"""``affect-memory bench recall --quick --json`` reports stages and recall (timings unchecked)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings

from affect_memory.bench.recall import format_report
from affect_memory.cli import main
from affect_memory.memory.chroma.collections import DEFAULT_HNSW

STAGES = (
    "embed_ms",
    "query_ms",
    "conversion_ms",
    "rerank_ms",
    "total_ms",
    "total_excluding_embed_ms",
)


def _json_run(*options: str) -> dict[str, Any]:
    """``bench recall --quick --json`` with ``options``, parsed."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "recall", "--quick", *options, "--json"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick JSON run shared by the module."""
    return _json_run()


def _positive_summary(summary: dict[str, float]) -> None:
    assert set(summary) == {"median", "p95"}
    assert math.isfinite(summary["median"]) and summary["median"] >= 0
    assert summary["p95"] >= summary["median"]


def test_quick_run_measures_one_thousand_memories_with_and_without_the_filter(
    report: dict[str, Any],
) -> None:
    assert [(row["corpus"], row["n"], row["filter"]) for row in report["rows"]] == [
        ("random", 1_000, "user"),
        ("random", 1_000, "shared"),
        ("random", 1_000, "none"),
    ]
    assert report["candidates"] == 64 and report["users"] == 10
    assert report["hnsw"] == DEFAULT_HNSW.model_dump()


def test_the_filtered_row_splits_recall_into_positive_stages(report: dict[str, Any]) -> None:
    row = report["rows"][0]
    for key in STAGES:
        _positive_summary(row[key])
    assert row["embed_ms"]["median"] > 0 and row["query_ms"]["median"] > 0
    assert row["total_ms"]["median"] >= row["total_excluding_embed_ms"]["median"]


def test_recall_at_k_is_a_fraction(report: dict[str, Any]) -> None:
    for row in report["rows"]:
        assert 0.0 <= row["recall_at_k_min"] <= row["recall_at_k"] <= 1.0
    _positive_summary(report["rows"][1]["query_ms"])


def test_targets_name_only_what_the_run_measured(report: dict[str, Any]) -> None:
    targets = report["targets"]
    assert "met" not in targets["conversion_share"]  # no 10,000-memory row in a quick run
    assert "met" not in targets["p95_at_100k"] and "met" not in targets["real_recall"]
    build = report["builds"][0]
    assert build["n"] == 1_000 and not build["reused"] and build["inserts_per_second"] > 0
    assert report["machine"]["cpus"] >= 1


def test_the_table_shows_each_stage(report: dict[str, Any]) -> None:
    text = format_report(report)
    assert "chroma" in text and "rerank" in text and "recall@64" in text and "1,000" in text


def test_the_old_shared_collection_path_is_timed_beside_the_per_user_one(
    report: dict[str, Any],
) -> None:
    user, shared = report["rows"][0], report["rows"][1]
    _positive_summary(shared["total_excluding_embed_ms"])
    assert shared["total_excluding_embed_ms"]["median"] >= shared["query_ms"]["median"]
    # 1,000 memories over 10 users: the 64 nearest of each user's 100, exact at this size.
    assert user["recall_at_k"] == pytest.approx(1.0, abs=0.02)
    assert shared["recall_at_k"] == pytest.approx(1.0, abs=0.02)
    assert "shared collection where user_id (shared)" in format_report(report).replace("\n", " ")


def _row(filter_: str, p95: float, recall: float) -> dict[str, Any]:
    summary = {"median": p95 / 2, "p95": p95}
    return {"corpus": "random", "n": 100_000, "filter": filter_, "recall_at_k": recall,
            "total_excluding_embed_ms": summary, "query_ms": summary}  # fmt: skip


@pytest.mark.parametrize(
    ("p95", "recall", "met"), [(18.7, 0.99, True), (31.0, 0.99, False), (18.7, 0.97, False)]
)
def test_the_100k_target_needs_the_p95_and_the_recall(p95: float, recall: float, met: bool) -> None:
    from affect_memory.bench.recall_report import targets

    judged = targets([_row("user", p95, recall), _row("shared", 164.0, 0.995)])["p95_at_100k"]
    assert judged["met"] is met and judged["measured_ms"] == p95
    assert judged["shared_collection_ms"]["p95"] == 164.0


def test_the_old_layout_lives_in_a_store_of_its_own(tmp_path: Path) -> None:
    """The per-user store holds only the users' collections, as a real one does: the shared
    collection's rows in its SQLite file would slow the per-user reads being timed."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "recall", "--quick", "--json", "--keep", str(tmp_path)]) == 0
    (own,) = [
        p for p in tmp_path.iterdir() if p.name.startswith("random-1000-") and p.is_dir()
        and not p.name.endswith("-shared")
    ]  # fmt: skip

    def collections(store: Path) -> dict[str, int]:
        client = chromadb.PersistentClient(
            path=str(store), settings=Settings(anonymized_telemetry=False)
        )
        try:
            return {c.name: c.count() for c in client.list_collections()}
        finally:
            client.close()

    users = collections(own)
    assert len(users) == 10 and sum(users.values()) == 1000
    assert all(name.startswith(f"{own.name}.user-") for name in users)
    assert collections(own.with_name(f"{own.name}-shared")) == {f"{own.name}-shared": 1000}


@pytest.fixture(scope="module")
def hybrid() -> dict[str, Any]:
    """One quick JSON run with the hybrid side-by-side over 300 real-embedding memories."""
    return _json_run("--hybrid", "300")


def test_the_hybrid_side_by_side_times_both_recalls_query_by_query(
    hybrid: dict[str, Any],
) -> None:
    row = hybrid["hybrid"]
    assert row["n"] == 300 and row["queries"] > 0
    assert sum(row["time_rules"].values()) == row["queries"]
    for summary in (row["dense_ms"], row["hybrid_ms"], *row["hybrid_stages_ms"].values()):
        _positive_summary(summary)
    assert row["ratio_median"] == pytest.approx(
        row["hybrid_ms"]["median"] / row["dense_ms"]["median"], abs=0.006
    )


def test_the_hybrid_embeds_only_the_owner_forms_the_memories_use(
    hybrid: dict[str, Any],
) -> None:
    """The bench's memories say "I" and "my", never "the user", and every query mentions its
    owner: a plan has two forms (first and third person; the bench user has no name), of
    which only the first is embedded."""
    embedding = hybrid["hybrid"]["embedding"]
    assert embedding["texts_per_query"] == {
        "as_written": 1,
        "every_form": 2,
        "forms_that_weigh": 1,
    }
    assert embedding["queries"] > 0
    for summary in embedding["ms"].values():
        _positive_summary(summary)
    text = format_report(hybrid)
    assert "every owner form (hybrid before)" in text and "target <= 1.5x" in text
