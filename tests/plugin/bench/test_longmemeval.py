"""LongMemEval through the product: the protocol's reading of the file, the metrics, and a
run of ``bench longmemeval`` on a small file written here (figures unchecked)."""

from __future__ import annotations

import gzip
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from affect_memory.bench.longmemeval import question_score
from affect_memory.bench.longmemeval_data import load_longmemeval
from affect_memory.cli import main
from affect_memory.kernel.errors import InvalidInputError

DATA = {
    "questions": [
        {
            "question_id": "q1",
            "question_type": "knowledge-update",
            "question": "How many bikes do I own now?",
            "answer": "Three",
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["s1", "s2", "s1"],
            "haystack_dates": [
                "2023/01/01 (Sun) 09:00",
                "2023/05/01 (Mon) 09:00",
                "2023/05/20 (Sat) 09:00",
            ],
            "answer_session_ids": ["s2"],
        },
        {
            "question_id": "q2",
            "question_type": "temporal-reasoning",
            "question": "What did I cook last Sunday?",
            "answer": "Paella",
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_session_ids": ["s3"],
            "haystack_dates": ["2023/05/28 (Sun) 20:00"],
            "answer_session_ids": ["s3"],
        },
    ],
    "sessions": {
        "s1": [
            {"role": "user", "content": "I have two bikes, a road bike and a gravel bike."},
            {"role": "assistant", "content": "Nice collection!"},
        ],
        "s2": [
            {"role": "user", "content": "I just bought a third bike, a cargo bike.",
             "has_answer": True},
            {"role": "assistant", "content": "Congratulations on the cargo bike."},
        ],
        "s3": [
            {"role": "user", "content": "On Sunday I cooked paella for friends.",
             "has_answer": True},
            {"role": "assistant", "content": "Sounds delicious."},
        ],
    },
}  # fmt: skip


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "lme.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(DATA, handle)
    return path


def test_each_question_is_a_user_of_its_haystack_turns(tmp_path: Path) -> None:
    first, second = load_longmemeval(_file(tmp_path))
    assert (
        second.records[0]["id"] == "s3:0" and second.questions[0].category == "temporal-reasoning"
    )
    assert first.user_id == "q1" and first.now.isoformat() == "2023-06-01T10:00:00+00:00"
    assert [r["id"] for r in first.records] == ["s1:0", "s1:1", "s2:0", "s2:1", "s1~2:0", "s1~2:1"]
    assert first.records[2]["text"] == "user: I just bought a third bike, a cargo bike."
    assert first.records[4]["timestamp"] == "2023-05-20T09:00:00+00:00"
    assert first.questions[0].evidence == ("s2:0",)
    assert first.questions[0].answer_sessions == ("s2",)
    assert [u.user_id for u in load_longmemeval(_file(tmp_path), types=["temporal-reasoning"])] == [
        "q2"
    ]


def test_a_file_that_is_not_longmemeval_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"questions": [], "sessions": {}}')
    with pytest.raises(InvalidInputError, match="no question with evidence turns"):
        load_longmemeval(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(InvalidInputError, match="not a LongMemEval file"):
        load_longmemeval(bad)


def test_the_metrics_are_turn_and_session_level() -> None:
    score = question_score(
        ["s1:0", "s2:1", "s2:0", "s4:0"], ["s2:0", "s5:0"], ["s2"], "knowledge-update"
    )
    assert score.mrr_at_10 == pytest.approx(1 / 3)
    assert (score.r_at_5, score.r_at_10) == (0.5, 0.5)
    assert (score.session_hit_at_5, score.session_hit_at_10) == (1.0, 1.0)
    assert question_score(["s1~2:0"], ["s1:0"], ["s1"], "x").session_hit_at_5 == 1.0


def test_the_bench_compares_every_system_and_refuses_a_bad_limit(tmp_path: Path) -> None:
    out = io.StringIO()
    argv = ["bench", "longmemeval", "--data", str(_file(tmp_path)), "--json",
            "--cache", str(tmp_path / "cache")]  # fmt: skip
    with redirect_stdout(out):
        assert main(argv) == 0
    report = json.loads(out.getvalue())
    assert report["questions"] == 2 and report["memories"] == 8
    assert set(report["systems"]) >= {"cosine", "BM25 (plain)", "recall (default)"}
    for system in report["systems"].values():
        assert set(system["types"]) == {"knowledge-update", "temporal-reasoning"}
        assert 0.0 <= system["overall"]["mrr_at_10"] <= 1.0
    err = io.StringIO()
    with redirect_stderr(err):
        assert main([*argv[:4], "--limit", "0"]) == 2
    assert "--limit must be a positive integer, got 0" in err.getvalue()
