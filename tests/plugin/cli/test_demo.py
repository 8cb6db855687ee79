"""The demo, end to end on the embedded default: real gate, Chroma, SQLite; scripted replies."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sqlite3
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.cli.demo import (
    DEMO_CONVERSATION,
    DEMO_NOW,
    DEMO_USER,
    SAMPLE_MEMORIES,
    DemoTurn,
    _RecordingRetriever,
    run_demo,
)
from affect_memory.errors import StoreError
from affect_memory.kernel import AffectEngine, GateResult
from affect_memory.kernel.adapters import InMemoryStateStore, ScriptedModel
from affect_memory.memory.batches import read_records
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[DemoTurn], str]:
    """One demo run for the module (it loads the model and runs six turns)."""
    home = tmp_path_factory.mktemp("demo-run")
    out = io.StringIO()
    turns = run_demo(home, out=out)
    return home, turns, out.getvalue()


def test_the_demo_prints_every_turn_with_state_and_evidence_and_commits_it(
    demo_run: tuple[Path, list[DemoTurn], str],
) -> None:
    home, turns, text = demo_run
    assert len(turns) == len(DEMO_CONVERSATION)
    for number, turn in enumerate(turns, start=1):
        assert f"Turn {number} " in text
        assert f"gate      {turn.intent}" in text
    assert text.count("  mood      V ") == len(turns)
    assert text.count("  presence  ") == len(turns)
    recalled = [turn for turn in turns if turn.result.memories]
    assert recalled, "the demo should retrieve memories on some turns"
    # The question about home surfaces the current fact above the stale one.
    home_turn = next(turn for turn in turns if "where I live" in turn.message)
    ranked = [scored.candidate.id for scored in home_turn.result.memories]
    assert "alice-home-new" in ranked
    assert "alice-home-old" not in ranked or ranked.index("alice-home-new") < ranked.index(
        "alice-home-old"
    )
    assert all(
        scored.candidate.id.startswith(("alice-", "turn-"))
        for turn in turns
        for scored in turn.result.memories
    )
    with sqlite3.connect(home / "demo" / "state.db") as db:
        (messages,) = db.execute("SELECT count(*) FROM messages").fetchone()
    assert messages == 2 * len(DEMO_CONVERSATION)
    assert DEMO_USER in text


def test_dist_rank_is_the_chroma_rank_in_the_whole_candidate_pool(
    demo_run: tuple[Path, list[DemoTurn], str],
) -> None:
    _, turns, text = demo_run
    sample_ids = {
        json.loads(line)["id"]
        for line in SAMPLE_MEMORIES.read_text(encoding="utf-8").splitlines()
        if line.strip() and json.loads(line)["user_id"] == DEMO_USER
    }
    first = turns[0]
    assert first.result.memories, "the first turn retrieves"
    # Before the first turn wrote anything, the pool is every one of the user's memories,
    # which is more than the rows shown.
    assert set(first.distance_order) == sample_ids
    assert len(first.distance_order) > len(first.result.memories)
    blocks = text.split("── Turn ")[1:]
    shown_beyond_rows = False
    for turn, block in zip(turns, blocks, strict=True):
        if not turn.result.memories:
            continue
        assert f"among all {len(turn.distance_order)} candidates retrieved" in block
        rows = re.findall(r"^ {4}(\d+) +(\d+) +(\S+) ", block, flags=re.MULTILINE)
        assert len(rows) == len(turn.result.memories)
        for (rank, dist_rank, ident), scored in zip(rows, turn.result.memories, strict=True):
            assert int(rank) == turn.result.memories.index(scored) + 1
            assert ident.rstrip("…") == scored.candidate.id[: len(ident.rstrip("…"))]
            pool_rank = turn.distance_order.index(scored.candidate.id) + 1
            assert int(dist_rank) == pool_rank
            shown_beyond_rows |= pool_rank > len(rows)
    assert shown_beyond_rows, "a kernel-ranked row came from beyond Chroma's top rows"


def test_the_demo_recreates_its_own_directory_but_refuses_a_foreign_one(tmp_path: Path) -> None:
    foreign = tmp_path / "demo"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("not the demo's")
    with pytest.raises(StoreError, match="not made by the demo"):
        run_demo(tmp_path, out=io.StringIO())
    assert (foreign / "precious.txt").exists()


@pytest.mark.parametrize("layout", ["under-a-file", "demo-is-a-file"])
def test_an_unusable_data_dir_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    if layout == "under-a-file":
        data_dir = blocker / "data"
    else:
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        (data_dir / "demo").write_text("a file where the demo's directory goes")

    assert main(["demo", "--data-dir", str(data_dir)]) == 2

    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("affect-memory demo: cannot use ")
    assert "pass a writable --data-dir" in line
    assert captured.out == ""


_GOOD = SAMPLE_MEMORIES.read_text(encoding="utf-8").splitlines()[0]


@pytest.mark.parametrize(
    "lines",
    [
        [_GOOD, json.dumps({**json.loads(_GOOD), "id": "bad", "significance": 5})],
        [
            _GOOD,
            json.dumps({**json.loads(_GOOD), "id": "bad", "significance": 5}),
            "{not json",
            _GOOD,
            json.dumps({**json.loads(_GOOD), "id": "naive", "timestamp": "2026-01-01T00:00:00"}),
        ],
    ],
    ids=["one-bad-line", "every-bad-line-listed"],
)
def test_bad_memories_are_named_by_line_like_ingest_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str]
) -> None:
    memories = tmp_path / "naive.jsonl"
    memories.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data_dir = tmp_path / "data"

    assert main(["demo", "--data-dir", str(data_dir), "--memories", str(memories)]) == 2
    [demo_line] = capsys.readouterr().err.splitlines()
    assert not data_dir.exists(), "the demo created its directory before validating"

    assert main(["ingest", str(memories), "--data-dir", str(tmp_path / "ingest")]) == 2
    [ingest_line] = capsys.readouterr().err.splitlines()
    assert f"{memories} line 2" in demo_line
    assert demo_line.removeprefix("affect-memory demo: ") == ingest_line.removeprefix(
        "affect-memory ingest: "
    )


@pytest.mark.parametrize("message", [message for message, _ in DEMO_CONVERSATION])
def test_the_demo_s_retriever_ranks_a_turn_as_recall_does(
    message: str, tmp_path: Path, embedder: Embedder
) -> None:
    """The demo wraps the user's retriever to record its pool: the wrapper must not hide
    recall's ranking (it once dropped ``ranking_weights``, and turns ranked with the kernel's
    defaults)."""
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(read_records(SAMPLE_MEMORIES))
        recording = _RecordingRetriever(memory.retriever_for(DEMO_USER))
        engine = AffectEngine(
            model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
            store=InMemoryStateStore(),
            conversation_id="c",
            retriever=recording,
            clock=lambda: DEMO_NOW,
        )
        turn = asyncio.run(engine.turn(message))
        expected = memory.recall(message, DEMO_USER, now=DEMO_NOW, top_k=6).results
    assert [(m.candidate.id, m.score) for m in turn.memories] == [
        (hit.id, hit.score) for hit in expected
    ]
    assert {m.candidate.id for m in turn.memories} <= {c.id for c in recording.pool}
