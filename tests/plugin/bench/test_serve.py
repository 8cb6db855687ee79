"""``bench serve`` at a tiny size against a real ``affect-memory serve``: the report's fields, and
every query answered over HTTP exactly as ``ChromaMemory.recall`` answers it (timings are never
checked: speed is only read off the benchmark's report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from affect_memory.bench.serve import (
    RATIO_TARGET,
    ServeMeasurement,
    ServePlan,
    format_report,
    measure,
    same_answer,
)
from affect_memory.cli import main

MEMORIES = 200
QUERIES = 20
USERS = 10


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> ServeMeasurement:
    """One tiny run shared by the module: 200 memories, 20 queries, 4 clients a side."""
    cache = tmp_path_factory.mktemp("bench-serve-cache")
    return measure(ServePlan(memories=MEMORIES, queries=QUERIES, clients=4, cache=cache))


def test_http_answers_every_query_as_in_process_recall_does(measured: ServeMeasurement) -> None:
    assert len(measured.http) == len(measured.in_process) == QUERIES
    for local, served in zip(measured.in_process, measured.http, strict=True):
        assert len(local) == 6  # each user holds 20 memories, so top 6 are always there
        assert [ident for ident, _ in served] == [ident for ident, _ in local]
        assert [score for _, score in served] == pytest.approx(
            [score for _, score in local], abs=1e-6
        )
    assert len(set(measured.in_process)) == QUERIES  # every query got an answer of its own


def test_each_query_is_answered_from_its_own_users_memories(measured: ServeMeasurement) -> None:
    warmups = measured.report["warmup_queries"]
    for index, answer in enumerate(measured.http):
        user = (warmups + index) % USERS  # queries go round the users; so do memory ids
        assert {int(ident.removeprefix("m")) % USERS for ident, _ in answer} == {user}


def test_the_report_sets_both_sides_side_by_side(measured: ServeMeasurement) -> None:
    report = measured.report
    assert report["benchmark"] == "serve"
    assert (report["memories"], report["users"], report["clients"]) == (MEMORIES, USERS, 4)
    assert (report["queries"], report["warmup_queries"], report["top_k"]) == (QUERIES, USERS, 6)
    assert [side["side"] for side in report["sides"]] == ["in-process", "http"]
    for side in report["sides"]:
        assert side["queries"] == QUERIES
        assert side["seconds"] > 0
        assert side["recalls_per_second"] == pytest.approx(QUERIES / side["seconds"], rel=0.01)
        assert 0 < side["latency_ms"]["median"] <= side["latency_ms"]["p95"]
    local, http = (side["latency_ms"] for side in report["sides"])
    assert report["ratio_p95"] == pytest.approx(http["p95"] / local["p95"], abs=1e-3)
    assert report["ratio_median"] == pytest.approx(http["median"] / local["median"], abs=1e-3)
    assert report["target"] == {
        "max_ratio_p95": RATIO_TARGET,
        "met": http["p95"] / local["p95"] <= RATIO_TARGET,
    }
    agreement = report["agreement"]
    assert (agreement["queries"], agreement["same_ranking"]) == (QUERIES, QUERIES)
    assert 0 <= agreement["max_score_difference"] <= agreement["tolerance"]
    assert report["build_seconds"] > 0


def test_the_table_shows_both_sides_and_the_verdict(measured: ServeMeasurement) -> None:
    report = measured.report
    text = format_report(report)
    lines = text.splitlines()
    assert lines[1].startswith("side ") and lines[2].startswith("----")
    assert lines[3].startswith("in-process ") and lines[4].startswith("http ")
    verdict = "met" if report["target"]["met"] else "NOT met"
    assert f"HTTP p95 / in-process p95: {report['ratio_p95']:.2f}x" in text
    assert f"aim <= 2x: {verdict}" in text
    assert f"answers: {QUERIES} of {QUERIES} queries ranked the same over HTTP" in text


def test_the_corpus_embeddings_are_cached_for_the_next_run(measured: ServeMeasurement) -> None:
    """The run embedded its corpus once (a fresh cache) and left the vectors for the next run."""
    assert measured.report["embed_seconds"] is not None
    cached = list(Path(measured.report["embedding_cache"]).glob(f"real-{MEMORIES}-*.npy"))
    assert len(cached) == 1 and cached[0].stat().st_size > MEMORIES * 384 * 4


def test_answers_agree_only_when_ids_and_scores_do() -> None:
    answer = (("a", 0.9), ("b", 0.5), ("c", 0.5))
    assert same_answer(answer, answer)
    assert same_answer(answer, (("a", 0.9), ("c", 0.5), ("b", 0.5)))  # a tie, either order
    assert not same_answer(answer, (("b", 0.5), ("a", 0.9), ("c", 0.5)))
    assert not same_answer(answer, (("a", 0.9), ("b", 0.5), ("d", 0.5)))
    assert not same_answer(answer, (("a", 0.9), ("b", 0.5)))
    assert not same_answer(answer, (("a", 0.9 + 1e-5), ("b", 0.5), ("c", 0.5)))
    assert same_answer(answer, (("a", 0.9 + 1e-7), ("b", 0.5), ("c", 0.5)))


@pytest.mark.parametrize(
    ("flag", "value", "least"), [("--clients", "0", 1), ("--memories", "99", 100)]
)
def test_a_bad_size_is_one_line_naming_the_flag(
    flag: str, value: str, least: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "serve", flag, value]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"affect-memory bench: {flag} must be an integer of at least {least}, got {value}"
    )
    assert captured.out == ""
