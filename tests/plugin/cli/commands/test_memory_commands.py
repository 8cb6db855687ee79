"""The memory commands end to end: ingest, recall, forget and stats on real stores."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from affect_memory.cli import main
from affect_memory.cli.demo import SAMPLE_MEMORIES
from affect_memory.memory.store import ChromaMemory
from affect_memory.metrics import first_rank, reciprocal_rank
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from tests.contracts.recall_agreement import assert_recall_agrees
from tests.contracts.recall_schema import RECALL_RESULT_KEYS, RELEVANCE_KEYS

ROOT = Path(__file__).resolve().parents[4]
SAMPLE = SAMPLE_MEMORIES
NOW = "2026-06-01T12:00:00Z"
KEYS = list(RECALL_RESULT_KEYS)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def data(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> str:
    """A data directory (the session's model is already loaded, so commands start fast)."""
    return str(tmp_path / "home")


@pytest.fixture
def ingested(data: str, capsys: pytest.CaptureFixture[str]) -> str:
    """A fresh data directory holding the sample corpus, for tests that change it."""
    code, out, _ = run(capsys, "ingest", str(SAMPLE), "--data-dir", data)
    assert code == 0 and out.startswith("ingested 40 memories into collection 'memories'")
    return data


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder) -> str:
    """One data directory holding the sample corpus, shared by the read-only tests."""
    data = str(tmp_path_factory.mktemp("library") / "home")
    assert main(["ingest", str(SAMPLE), "--data-dir", data, "--no-progress"]) == 0
    return data


def test_ingest_then_stats_counts_every_user(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "stats", "--json", "--data-dir", library)
    stats = json.loads(out)
    assert code == 0
    assert stats["users"] == {"alice": 13, "bob": 14, "carmen": 13} and stats["count"] == 40
    assert stats["space"] == "cosine" and stats["size_bytes"] > 0
    assert stats["hnsw"] == {"ef_construction": 200, "ef_search": 500, "max_neighbors": 32}
    code, out, _ = run(capsys, "stats", "--data-dir", library)
    assert code == 0 and "space cosine" in out and "(total)" in out and "carmen" in out


def test_ingesting_twice_is_harmless(ingested: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ingest", str(SAMPLE), "--data-dir", ingested)
    assert (code, out.strip()) == (
        0,
        f"ingested 0 memories into collection 'memories' at {ingested}/chroma, "
        "40 already stored and skipped",
    )
    code, out, _ = run(capsys, "ingest", str(SAMPLE), "--replace", "--data-dir", ingested)
    assert code == 0 and out.startswith("ingested 40 memories")
    assert json.loads(run(capsys, "stats", "--json", "--data-dir", ingested)[1])["count"] == 40


def test_recall_json_is_ranked_with_the_full_breakdown(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys,
        "recall",
        "Where do I live?",
        "--user-id",
        "alice",
        "--now",
        NOW,
        "--top",
        "3",
        "--json",
        "--data-dir",
        library,
    )
    assert code == 0, err
    result = json.loads(out)
    assert list(result) == ["query", "user_id", "now", "plan", "results", "skipped"]
    assert (result["plan"]["kind"], result["plan"]["subject"]) == ("state", "user")
    assert result["skipped"] == []
    assert (result["query"], result["user_id"]) == ("Where do I live?", "alice")
    assert result["now"] == "2026-06-01T12:00:00.000000+00:00"
    assert [list(hit) for hit in result["results"]] == [KEYS] * 3
    assert [list(hit["relevance"]) for hit in result["results"]] == [list(RELEVANCE_KEYS)] * 3
    assert result["results"][0]["id"] == "alice-home-new"
    assert "older than the newest of the query's 3 closest" in result["results"][0]["time_rule"]
    scores = [hit["score"] for hit in result["results"]]
    assert scores == sorted(scores, reverse=True)
    assert all(hit["id"].startswith("alice-") for hit in result["results"])


def test_recall_prints_a_readable_table(library: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "recall",
        "Am I allergic to anything?",
        "--user-id",
        "carmen",
        "--now",
        NOW,
        "--mood-valence",
        "-0.5",
        "--data-dir",
        library,
    )
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(
        "'Am I allergic to anything?' for carmen at 2026-06-01"
    )
    assert lines[1].split()[:6] == ["#", "score", "dist", "sim", "recency", "age"]
    assert "carmen-allergy-new" in lines[3] and len(lines) == 3 + 6 + 1
    assert lines[-1].startswith("time rule of #1: current-state query (about the user, no past")


def _recall_ids(capsys: pytest.CaptureFixture[str], library: str, *extra: str) -> list[str]:
    code, out, err = run(
        capsys, "recall", "Where do I live?", "--user-id", "alice", "--now", NOW, "--json",
        "--data-dir", library, *extra,
    )  # fmt: skip
    assert code == 0, err
    return [hit["id"] for hit in json.loads(out)["results"]]


def test_recall_takes_its_ranking_settings_from_a_weights_file(
    library: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    default = _recall_ids(capsys, library)
    assert default.index("alice-home-new") < default.index("alice-home-old")
    # Recency switched off (a floor of 1): the stale fact, the closer match, comes first.
    flat = tmp_path / "flat.json"
    flat.write_text('{"recency_floor": 1.0}')
    unaged = _recall_ids(capsys, library, "--weights", str(flat))
    assert unaged.index("alice-home-old") < unaged.index("alice-home-new")
    narrow = tmp_path / "narrow.json"
    narrow.write_text('{"dense_candidates": 2, "lexical_candidates": 0}')
    assert len(_recall_ids(capsys, library, "--weights", str(narrow), "--top", "2")) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"recency_floor": 0.1, "recency_horizn_days": 30}')
    code, out, err = run(
        capsys, "recall", "q", "--user-id", "alice", "--weights", str(bad), "--data-dir", library
    )
    assert (code, out) == (2, "")
    assert f"{bad}: unknown field 'recency_horizn_days'" in err
    assert "did you mean 'recency_horizon_days'?" in err and err.count("\n") == 1


def test_batch_recall_prints_one_json_result_per_query_line(
    library: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"query": "Where do I live?", "user_id": "bob"}\n\n'
        '{"query": "Where do I live?", "user_id": "carmen", "mood_valence": 0.5}\n'
        '{"query": "How much coffee do I drink?", "user_id": "bob", "want": ["bob-coffee-new"]}\n'
    )
    code, out, err = run(
        capsys,
        "recall",
        "--queries",
        str(queries),
        "--now",
        NOW,
        "--top",
        "2",
        "--data-dir",
        library,
    )
    assert code == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["user_id"], r["results"][0]["id"]) for r in results] == [
        ("bob", "bob-home-new"),
        ("carmen", "carmen-home-new"),
        ("bob", "bob-coffee-new"),
    ]
    # a key that is not a query field is not used, and comes back as the result's labels
    assert results[2]["labels"] == {"want": ["bob-coffee-new"]}
    for query, batched in zip(
        [("Where do I live?", "bob", "0"), ("Where do I live?", "carmen", "0.5")],
        results,
        strict=False,
    ):
        text, user, mood = query
        single = run(
            capsys,
            "recall",
            text,
            "--user-id",
            user,
            "--mood-valence",
            mood,
            "--now",
            NOW,
            "--top",
            "2",
            "--json",
            "--data-dir",
            library,
        )[1]
        alone = json.loads(single)
        # Before: compared bit for bit, so 0.5951807992060979 != 0.5951808548271657 failed on
        # CPUs that embed a query in a batch differently in the last bits.
        assert {k: v for k, v in alone.items() if k != "results"} == {
            k: v for k, v in batched.items() if k != "results"
        }
        assert_recall_agrees(alone["results"], batched["results"])


PROBES = ROOT / "fixtures" / "sample_memories.probes.jsonl"


def test_the_stale_versus_current_probes_through_ingest_and_recall_queries(
    library: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 12's stale-versus-current check as a user runs it: the sample corpus ingested, the
    probes file itself (its "current" and "stale" ids are labels, echoed, not query fields)
    asked in one ``recall --queries --json --now`` run; every current fact ranks above its
    stale one, and the current facts' MRR stays at the 0.88 the held-out corpus needs."""
    probes = [json.loads(line) for line in PROBES.read_text().splitlines() if line.strip()]
    code, out, err = run(
        capsys, "recall", "--queries", str(PROBES), "--json", "--now", NOW, "--top", "10",
        "--data-dir", library,
    )  # fmt: skip
    assert code == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == len(probes) == 30
    reciprocal, above = [], 0
    for probe, result in zip(probes, results, strict=True):
        ids = [hit["id"] for hit in result["results"]]
        assert result["user_id"] == probe["user_id"]
        assert result["labels"] == {"current": probe["current"], "stale": probe["stale"]}
        rank = first_rank(ids, {probe["current"]})
        reciprocal.append(reciprocal_rank(ids, {probe["current"]}))
        stale = ids.index(probe["stale"]) if probe["stale"] in ids else len(ids)
        above += rank is not None and rank - 1 < stale
    assert above == 30, f"{above}/30 current facts above their stale ones"
    assert sum(reciprocal) / len(reciprocal) >= 0.88


def test_a_batch_of_queries_lists_every_bad_line(
    library: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"query": "Where do I live?", "user_id": "bob"}\n'
        '{"query": "   ", "user_id": "bob"}\n'
        '{"query": "tea", "user_id": "bob", "mood_valence": 5.0}\n'
        "not json\n"
    )
    code, out, err = run(capsys, "recall", "--queries", str(queries), "--data-dir", library)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"{queries} line 2: query must be a non-empty, non-blank string, got '" in err
    # Before: "mood_valence must be within [-1, 1], got 5.0, got 5.0".
    assert f"{queries} line 3: mood_valence must be within [-1, 1], got 5.0;" in err
    assert "got 5.0, got 5.0" not in err
    assert f"{queries} line 4: invalid JSON" in err and err.rstrip().endswith("(3 problems)")


def test_forget_deletes_one_users_ids_and_reports_unknown_ones(
    ingested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "forget", "bob-injection", "nope", "--user-id", "bob", "--data-dir", ingested
    )
    assert (code, out.strip()) == (0, "forgot 1 memory; not found for 'bob': nope")
    code, out, _ = run(
        capsys, "forget", "alice-home-old", "--user-id", "bob", "--json", "--data-dir", ingested
    )
    assert json.loads(out) == {"forgotten": [], "not_found": ["alice-home-old"]}
    assert json.loads(run(capsys, "stats", "--json", "--data-dir", ingested)[1])["users"] == {
        "alice": 13,
        "bob": 13,
        "carmen": 13,
    }


def test_forget_without_a_user_is_refused(
    ingested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `forget alice-home-old` deleted it whoever it belonged to.
    with pytest.raises(SystemExit) as exited:
        main(["forget", "alice-home-old", "--data-dir", ingested])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "affect-memory forget" in err and "--user-id" in err and "Traceback" not in err
    stats = json.loads(run(capsys, "stats", "--json", "--data-dir", ingested)[1])
    assert stats["users"]["alice"] == 13


def test_the_same_id_of_two_users_is_two_memories_from_the_shell(
    data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "both.jsonl"
    both.write_text(
        '{"id": "m1", "text": "I like tea.", "user_id": "ann", "timestamp": 0}\n'
        '{"id": "m1", "text": "I like coffee.", "user_id": "bob", "timestamp": 0}\n'
    )
    code, out, _ = run(capsys, "ingest", str(both), "--data-dir", data)
    assert code == 0 and out.startswith("ingested 2 memories")
    assert run(capsys, "forget", "m1", "--user-id", "ann", "--data-dir", data)[1].strip() == (
        "forgot 1 memory"
    )
    code, out, _ = run(capsys, "recall", "drinks", "--user-id", "bob", "--json", "--data-dir", data)
    assert [hit["text"] for hit in json.loads(out)["results"]] == ["I like coffee."]


def test_one_memory_is_one_memory(
    data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text('{"id": "m1", "text": "I like tea.", "user_id": "ann", "timestamp": 0}\n')
    # Before: "ingested 1 memories".
    assert run(capsys, "ingest", str(one), "--data-dir", data)[1].startswith(
        "ingested 1 memory into collection 'memories'"
    )


def test_1100_lines_with_one_bad_line_exit_2_and_store_nothing(
    data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        json.dumps({"id": f"m{i}", "text": f"note {i}", "user_id": "ann", "timestamp": 0})
        for i in range(1100)
    ]
    lines[1049] = json.dumps(
        {"id": "m1049", "text": "x", "user_id": "ann", "timestamp": 0, "extra": {"#document": "y"}}
    )
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "ingest", str(big), "--no-progress", "--data-dir", data)
    # Before: exit 2 after 1,024 memories (two 512-record chunks) had been stored.
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"{big} line 1050 (id 'm1049'): extra key '#document' starts with '#'" in err
    assert not Path(data).exists()


def test_the_data_dir_defaults_to_affect_memory_home(
    data: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AFFECT_MEMORY_HOME", data)
    assert run(capsys, "ingest", str(SAMPLE))[0] == 0
    assert (Path(data) / "chroma" / "chroma.sqlite3").exists()
    assert json.loads(run(capsys, "stats", "--json")[1])["count"] == 40


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"id": "x", "text": "t", "user_id": "u", "timestamp": "2026-06-01T10:00:00"}',
            "line 3 (id 'x'): timestamp must carry a UTC offset or 'Z' (naive timestamps are "
            "ambiguous), got '2026-06-01T10:00:00'",
        ),
        (
            '{"id": "x", "text": "t", "user_id": "u", "timestamp": 0, "significance": "high"}',
            "line 3 (id 'x'): significance must be a number, got 'high'",
        ),
        (
            '{"id": "x", "text": "t", "user_id": "a", "timestamp": 0, "user_id": "b"}',
            "line 3: invalid JSON: key 'user_id' appears twice",
        ),
        ('{"id": "x", "text": ', "line 3: invalid JSON"),
        ("[1, 2]", "line 3: expected a JSON object"),
        (
            '{"id": "alice-home-old", "text": "t", "user_id": "alice", "timestamp": 0}',
            "line 3: id 'alice-home-old' of user 'alice' repeats line 1",
        ),
    ],
)
def test_a_bad_line_exits_2_naming_it_and_nothing_is_written(
    data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str
) -> None:
    lines = SAMPLE.read_text().splitlines()[:2]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines, line, *lines[1:]]) + "\n")
    code, out, err = run(capsys, "ingest", str(bad), "--data-dir", data)
    assert (code, out) == (2, "")
    assert err.startswith(f"affect-memory ingest: {bad} ") and expected in err
    assert err.count("\n") == 1
    assert not Path(data).exists()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ingest", "missing.jsonl"], "cannot read missing.jsonl: No such file"),
        (["recall", "q", "--user-id", "alice", "--now", "2026-06-01T12:00:00"], "--now must carry"),
        (["recall", "q", "--user-id", "alice", "--now", "noon"], "--now is not an ISO-8601"),
        (["recall", "q", "--user-id", "alice", "--mood-valence", "2"], "mood_valence must be"),
        (["recall", "   ", "--user-id", "alice"], "query must be a non-empty, non-blank"),
        (["recall", "q", "--user-id", "a\x00b"], "user_id must not contain NUL"),
        (["recall", "q", "--user-id", "alice", "--timeout", "0"], "timeout must be a number"),
        (["recall", "q", "--user-id", "alice", "--mood-valence", "nan"], "mood_valence must be"),
        (["recall", "q", "--user-id", "alice", "--top", "0"], "top_k must be >= 1"),
        (["recall", "q", "--user-id", "alice", "--candidates", "1025"], "at most 1024, got 1025"),
        (["recall", "q", "--user-id", "alice", "--weights", "nope.json"], "cannot read nope.json"),
        (["recall", "q"], "--user-id is required"),
        (["recall"], "either QUERY"),
        (["recall", "--queries", "q.jsonl", "--mood-valence", "0.5"], "inside each line"),
        (["recall", "q", "--user-id", "u", "--chroma", "localhost:8000"], "--chroma takes a"),
        (["recall", "q", "--user-id", "u", "--chroma", "http://127.0.0.1:9"], "cannot reach"),
        (["stats", "--collection", "nope"], "no collection 'nope'"),
        (["forget", "x", "--user-id", "u", "--collection", "a b"], "collection name"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(
    library: str, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, err = run(capsys, *argv, "--data-dir", library)
    assert code == 2 and out == ""
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_reading_a_missing_data_dir_exits_2_and_creates_nothing(
    data: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["stats"], ["recall", "q", "--user-id", "u"], ["forget", "x", "--user-id", "u"]):
        code, _, err = run(capsys, *argv, "--data-dir", data)
        assert code == 2 and "no memory store" in err
    assert not Path(data).exists()


def test_a_locked_data_dir_exits_2_pointing_to_server_mode(
    ingested: str, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(Path(ingested) / "chroma", embedder=embedder):
        other = subprocess.run(
            [sys.executable, "-m", "affect_memory.cli", "stats", "--data-dir", ingested],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.count("\n") == 1 and "Traceback" not in other.stderr
    assert "in use by another process" in other.stderr and "--chroma http://" in other.stderr


def test_the_commands_work_against_a_chroma_server(
    chroma_server: str, embedder: SentenceTransformerEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ["--chroma", chroma_server, "--collection", f"cli-{uuid.uuid4().hex[:8]}"]
    assert run(capsys, "ingest", str(SAMPLE), *server)[0] == 0
    code, out, _ = run(
        capsys,
        "recall",
        "Which language am I learning?",
        "--user-id",
        "bob",
        "--now",
        NOW,
        "--json",
        *server,
    )
    assert code == 0 and json.loads(out)["results"][0]["id"] == "bob-language-new"
    stats = json.loads(run(capsys, "stats", "--json", *server)[1])
    assert stats["count"] == 40 and stats["size_bytes"] is None
    assert stats["location"] == chroma_server


def test_a_single_query_error_says_no_query_number(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "recall", "q", "--user-id", "alice", "--mood-valence", "5", "--data-dir", library
    )
    # Before: "query 0: mood_valence must be within [-1, 1], got 5.0, got 5.0".
    assert (code, err) == (
        2,
        "affect-memory recall: mood_valence must be within [-1, 1], got 5.0\n",
    )


def test_stats_lists_each_user_collection(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stats = json.loads(run(capsys, "stats", "--json", "--data-dir", library)[1])
    assert stats["collection"] == "memories" and stats["collections"] == 3
    code, out, _ = run(capsys, "stats", "--data-dir", library)
    assert code == 0 and ": 3 user collections" in out.splitlines()[0]


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        (
            lambda lines: "\n".join(lines).encode().replace(b"note 2", b"caf\xe9 2"),
            "line 3: not UTF-8 text (byte 0xe9 at byte",
        ),
        (lambda lines: "\n".join(lines).encode("utf-16"), "line 1: UTF-16 text"),
        (lambda lines: "\n".join(lines).encode("utf-16-le"), "line 1: UTF-16 text"),
    ],
)
def test_a_file_not_in_utf8_is_refused_naming_its_line(
    encoded: Any, expected: str, data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        json.dumps({"id": f"m{i}", "text": f"note {i}", "user_id": "ann", "timestamp": 0})
        for i in range(4)
    ]
    path = tmp_path / "memories.jsonl"
    path.write_bytes(encoded(lines))
    code, out, err = run(capsys, "ingest", str(path), "--no-progress", "--data-dir", data)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"{path} {expected}" in err, err
    assert not Path(data).exists()
