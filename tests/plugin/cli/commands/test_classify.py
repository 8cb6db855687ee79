"""The ``classify`` command: one text, a batch, an evaluation, bad lines and limits."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from affect_memory.cli import main
from affect_memory.kernel.appraisal import BUILTIN_INTENTS
from tests.plugin.gate.helpers import (
    ROOT,
    SCHEDULING,
    preset_exemplars,
    write_exemplars,
)

# -- the classify command ----------------------------------------------------------------------


def _jsonl(tmp_path: Path, lines: Sequence[str], name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def cli_embedder(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> Any:
    """Point the command's default embedder at the session's, so the preset is embedded once."""
    import affect_memory.models.embeddings

    monkeypatch.setattr(affect_memory.models.embeddings, "default_embedder", lambda: embedder)
    return embedder


@pytest.mark.usefixtures("cli_embedder")
def test_cli_single_text_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify", "you are a pathetic waste of code", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "intent", "confidence", "should_retrieve"}
    assert out["text"] == "you are a pathetic waste of code"
    assert out["intent"] == "ABUSE"
    assert 0 < out["confidence"] <= 1 and out["should_retrieve"] is False


@pytest.mark.usefixtures("cli_embedder")
def test_cli_single_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify", "Why is the sea salty?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CURIOSITY  confidence ")
    assert "retrieve yes" in out and "VULNERABILITY" in out


@pytest.mark.usefixtures("cli_embedder")
def test_cli_batch_prints_one_line_per_query_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = ["sorry for snapping at you earlier", "whatever", "How do magnets work?"]
    lines = [
        json.dumps({"text": texts[0], "id": 7}),
        "",
        *(json.dumps({"text": t}) for t in texts[1:]),
    ]
    assert main(["classify", "--queries", str(_jsonl(tmp_path, lines)), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["text"] for row in out] == texts
    assert [row["intent"] for row in out] == ["APOLOGY", "NEGLECT", "CURIOSITY"]
    assert [row["should_retrieve"] for row in out] == [True, False, True]
    assert all(set(row) == {"text", "intent", "confidence", "should_retrieve"} for row in out)


@pytest.mark.usefixtures("cli_embedder")
def test_cli_evaluate_reports_accuracy_and_confusion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        json.dumps({"text": "you brainless idiot", "intent": "ABUSE"}),
        json.dumps({"text": "I'm sorry I was rude", "intent": "apology "}),
        json.dumps({"text": "you brainless idiot", "intent": "CASUAL"}),
    ]
    path = _jsonl(tmp_path, lines)
    assert main(["classify", "--evaluate", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["correct"], report["total"]) == (2, 3)
    assert report["accuracy"] == round(2 / 3, 4)
    assert report["labels"] == list(BUILTIN_INTENTS)
    assert sum(map(sum, report["confusion"])) == 3
    assert report["per_intent"]["APOLOGY"]["recall"] == 1.0
    assert main(["classify", "--evaluate", str(path)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("accuracy 0.667 (2/3)")
    assert "precision" in table and "confusion (rows: labelled, columns: predicted)" in table
    assert main(["classify", "--evaluate", str(path), "--min-accuracy", "0.9"]) == 1
    assert "below --min-accuracy" in capsys.readouterr().err


@pytest.mark.usefixtures("cli_embedder")
def test_cli_exemplars_file_replaces_the_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = preset_exemplars()
    data["intents"]["SCHEDULING"] = SCHEDULING
    path = write_exemplars(tmp_path, data)
    args = ["classify", "Move my dentist appointment to Wednesday", "--exemplars", str(path)]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["intent"] == "SCHEDULING"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"text": "fine"}', "{not json"], "line 2: invalid JSON"),
        (['{"text": "fine"}', "", '["a list"]'], "line 3: expected a JSON object, got list"),
        (['{"query": "wrong key"}'], 'line 1: missing "text"'),
        (['{"text": 5}'], 'line 1: "text" must be a string, got int'),
        ([""], "no queries"),
    ],
)
def test_cli_bad_query_line_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], message: str
) -> None:
    path = _jsonl(tmp_path, lines)
    assert main(["classify", "--queries", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.count("\n") == 1


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"text": "hi", "intent": "GREETING"}'], "line 1: intent 'GREETING' is not one of"),
        (['{"text": "hi"}'], 'line 1: missing "intent"'),
        (['{"text": "hi", "intent": "CASUAL", "split": 3}'], 'line 1: "split" must be a string'),
    ],
)
def test_cli_bad_evaluate_line_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], message: str
) -> None:
    assert main(["classify", "--evaluate", str(_jsonl(tmp_path, lines))]) == 2
    assert message in capsys.readouterr().err


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify"]) == 2
    assert "exactly one of TEXT" in capsys.readouterr().err
    assert main(["classify", "hi", "--min-accuracy", "0.5"]) == 2
    assert "--min-accuracy only applies" in capsys.readouterr().err
    assert main(["classify", "hi", "--exemplars", str(write_exemplars(tmp_path, "[]"))]) == 2
    assert "top level must be an object" in capsys.readouterr().err


def test_cli_bad_line_in_a_fresh_process_is_one_line_without_traceback(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, ['{"text": "ok"}', '{"text": null}'])
    done = subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", "classify", "--queries", str(path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f'affect-memory classify: {path} line 2: "text" must be a string, got NoneType'
    ]


def test_cli_refuses_a_message_longer_than_the_engines_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from affect_memory.kernel.engine import DEFAULT_ENGINE_LIMITS

    limit = DEFAULT_ENGINE_LIMITS.max_message_chars
    assert main(["classify", "x" * 100_000]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"affect-memory classify: TEXT has 100,000 characters; the limit is {limit:,} "
        "(as for a turn)"
    )
    path = _jsonl(tmp_path, ['{"text": "fine"}', json.dumps({"text": "y" * (limit + 1)})])
    assert main(["classify", "--queries", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert f'{path} line 2: "text" has {limit + 1:,} characters' in line
    assert main(["classify", "y" * limit, "--json"]) == 0, "the limit itself is accepted"
    assert json.loads(capsys.readouterr().out)["text"] == "y" * limit


