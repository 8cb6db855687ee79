"""Start-up and input errors: one stderr line, exit 2, no traceback (issue 23, item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.settings import load_recall_settings

DEEP = '{"a": ' * 1000 + "1" + "}" * 1000


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    return subprocess.run(
        [sys.executable, "-m", "affect_memory.cli", *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=180,
        env=env,
        cwd=cwd,
    )


def _one_line(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--collection", "a"),
        ("--chroma", "http://127.0.0.1:9"),
        ("--index", "bogus://x"),
        ("--index", "postgresql://u@127.0.0.1:9/db"),
    ],
)
def test_mcp_start_up_errors_name_the_flag_in_one_line(
    tmp_path: Path, flag: str, value: str
) -> None:
    done = _cli("mcp", "--data-dir", str(tmp_path / "data"), flag, value, cwd=tmp_path)
    _one_line(done, "affect-memory mcp: ", f"{flag}: ")


def test_recall_weights_nested_too_deep_names_the_flag_and_file(tmp_path: Path) -> None:
    weights = tmp_path / "weights.json"
    weights.write_text(DEEP, encoding="utf-8")
    args = ("recall", "hi", "--user-id", "u", "--data-dir", str(tmp_path / "d"))
    done = _cli(*args, "--weights", str(weights), cwd=tmp_path)
    _one_line(done, "--weights", str(weights), "nested deeper than")


def test_recall_where_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    args = ("recall", "hi", "--user-id", "u", "--data-dir", str(tmp_path / "d"))
    done = _cli(*args, "--where", DEEP, cwd=tmp_path)
    _one_line(done, "--where", "nested deeper than")


def test_ingest_a_deep_line_names_the_file_and_line(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text("[" * 1000 + "]" * 1000 + "\n", encoding="utf-8")
    done = _cli("ingest", str(records), "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    _one_line(done, f"{records} line 1", "nested deeper than")


@pytest.mark.parametrize("text", [DEEP, '{"recency_floor": ' + "1" * 5000 + "}"])
def test_load_recall_settings_refuses_deep_or_long_json_in_one_line(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInputError) as caught:
        load_recall_settings(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
