"""``affect-memory bench locomo``: the protocol's reading of the data, the metrics, and a quick
run through the product on a slice of the dev half (timings and figures unchecked)."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from affect_memory.bench.embedding_cache import CachedEmbedder
from affect_memory.bench.locomo import DEFAULT_DATA
from affect_memory.bench.locomo_data import evidence_ids, load_conversation, load_locomo, turn_id
from affect_memory.bench.locomo_metrics import (
    METRICS,
    age_bucket,
    format_locomo_report,
    question_score,
)
from affect_memory.bench.plain_bm25 import PlainBm25, plain_tokens
from affect_memory.bench.rankers import reciprocal_rank_fusion
from affect_memory.cli import main
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.models.embeddings import Embedder

CONVERSATION = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a photo of a dog"},
    ],
    "session_2_date_time": "10:00 am on 20 June, 2023",
    "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The cat is called Miso."}],
    "session_3_date_time": "9:00 am on 1 July, 2023",
    "session_3": [],
    "qa": [
        {"question": "What pet did Ann adopt?", "evidence": ["D1:1; D2:01"], "category": 1},
        {"question": "What did Bo show?", "evidence": ["D:1:2", "D9:9"], "category": 4},
        {"question": "Unanswerable?", "evidence": ["D1:1"], "category": 5},
        {"question": "No evidence left?", "evidence": ["D"], "category": 2},
    ],
}


def test_dialogue_ids_are_normalised_and_evidence_split() -> None:
    assert (turn_id("D:11:26"), turn_id("D30:05"), turn_id("D"), turn_id("X1:2")) == (
        "D11:26",
        "D30:5",
        None,
        None,
    )
    assert evidence_ids(["D1:3; D:2:4", "D1:3,D5:01 D6:2"]) == ["D1:3", "D2:4", "D5:1", "D6:2"]


def test_a_conversation_is_read_by_the_protocol(tmp_path: Path) -> None:
    path = tmp_path / "7.json"
    path.write_text(json.dumps(CONVERSATION))
    conversation = load_conversation(path)
    assert conversation.user_id == "7"
    assert [r["text"] for r in conversation.records] == [
        "Ann: I adopted a cat.",
        "Bo: Look! [a photo of a dog]",
        "Ann: The cat is called Miso.",
    ]
    assert conversation.records[0]["timestamp"] == "2023-05-08T13:56:00+00:00"
    # now: the last session that has turns (not the empty third one), plus one day
    assert conversation.now.isoformat() == "2023-06-21T10:00:00+00:00"
    assert [(q.category, q.evidence) for q in conversation.questions] == [
        (1, ("D1:1", "D2:1")),
        (4, ("D1:2",)),
    ]


def test_bad_data_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is not a directory"):
        load_locomo(tmp_path / "missing")
    with pytest.raises(InvalidInputError, match=r"no LoCoMo conversation files \(\*\.json\)"):
        load_locomo(tmp_path)
    broken = dict(CONVERSATION, session_1_date_time="yesterday")
    (tmp_path / "8.json").write_text(json.dumps(broken))
    with pytest.raises(InvalidInputError, match="session_1_date_time: a session date-time"):
        load_locomo(tmp_path)
    with pytest.raises(InvalidInputError, match="no LoCoMo conversation 99"):
        load_locomo(tmp_path, conversations=["99"])


def test_the_metrics_of_one_ranking() -> None:
    score = question_score(["x", "e2", "y", "e1"], ["e1", "e2"], category=2, evidence_age_days=3)
    assert (score.mrr_at_10, score.r_at_1, score.r_at_5, score.r_at_10, score.hit_at_5) == (
        0.5,
        0.0,
        1.0,
        1.0,
        1.0,
    )
    missed = question_score(["x"] * 10 + ["e1"], ["e1"], category=1, evidence_age_days=400)
    assert (missed.mrr_at_10, missed.r_at_10, missed.hit_at_5) == (0.0, 0.0, 0.0)
    assert (age_bucket(3), age_bucket(7), age_bucket(400)) == ("0-7 d", "7-30 d", ">= 180 d")


def test_plain_bm25_is_the_protocols_baseline() -> None:
    assert plain_tokens("Where did Jon's dog go, in 2022?") == ["jon", "s", "dog", "go", "2022"]
    index = PlainBm25(["a", "b", "c"], ["my dog barks", "a dog and a dog", "the cat"])
    assert index.top("dog", 5) == ["b", "a"]  # tf 2 beats tf 1; no match, no rank
    assert index.top("the of", 5) == []


def test_reciprocal_rank_fusion_sums_one_over_k_plus_rank() -> None:
    # a: 1/61 + 1/63; b: 1/62 + 1/61; c: 1/63; d: 1/62. So b, a, d, c.
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d", "a"]], 10)
    assert fused == ["b", "a", "d", "c"]
    assert reciprocal_rank_fusion([["a", "b"], ["c"]], 2) == ["a", "c"]  # ties: first seen


def test_the_embedding_cache_embeds_each_text_once(tmp_path: Path, embedder: Embedder) -> None:
    first = CachedEmbedder(embedder, tmp_path)
    vectors = first.embed_documents(["one text", "another", "one text"])
    assert first.embedded == 2 and vectors.shape == (3, 384)
    first.save()
    second = CachedEmbedder(embedder, tmp_path)
    again = second.embed_documents(["another", "one text"])
    assert second.embedded == 0
    assert again.tolist() == [vectors[1].tolist(), vectors[0].tolist()]


DATA = DEFAULT_DATA
"""The dev half beside the repository; CI has it, a checkout elsewhere may not."""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One quick JSON run on a slice of one conversation, shared by the module."""
    if not DATA.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the LoCoMo dev half is missing at {DATA} (CI requires it)")
        pytest.skip(f"the LoCoMo dev half is not at {DATA}")
    cache = tmp_path_factory.mktemp("locomo-cache")
    out = io.StringIO()
    argv = ["bench", "locomo", "--data", str(DATA), "--conversations", "30", "--questions",
            "12", "--cache", str(cache), "--json"]  # fmt: skip
    with redirect_stdout(out):
        assert main(argv) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_every_system_is_scored_per_category_on_the_same_questions(
    report: dict[str, Any],
) -> None:
    assert report["conversations"] == ["30"] and report["questions"] == 12
    assert list(report["systems"]) == [
        "cosine",
        "BM25 (plain)",
        "BM25 (index)",
        "RRF (BM25 + cosine)",
        "dense recall (before)",
        "recall (default)",
    ]
    for system in report["systems"].values():
        assert system["overall"]["n"] == 12
        assert all(0.0 <= system["overall"][name] <= 1.0 for name in METRICS)
        assert sum(c["n"] for c in system["categories"].values()) == 12
    pool = report["pool"]
    assert 0 < pool["in_pool"] <= pool["evidence"] and 0.0 < pool["coverage"] <= 1.0


def test_the_table_names_each_system(report: dict[str, Any]) -> None:
    text = format_locomo_report(report)
    assert "MRR@10" in text and "recall (default)" in text and "default pool:" in text
