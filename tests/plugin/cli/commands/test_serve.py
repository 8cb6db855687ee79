"""``affect-memory serve``'s command line: a helpful ``--help``, and every bad setting refused in
one line naming the flag, exit 2, before anything is created, loaded or bound.

(The running server is tested in ``tests/plugin/http``.)
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from affect_memory.cli.main import main


def test_help_says_how_to_serve_safely(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--host", "127.0.0.1", "--token", "$AFFECT_MEMORY_TOKEN", "Authorization: Bearer TOKEN",
        "GET /v1/health", "0 picks a free one", "affect-memory serve: listening on",
        "504 Gateway Timeout", "--inspector", "--model {scripted,openai}", "$OPENAI_API_KEY",
        "--print-openapi", "/openapi.json", "problem+json", "--data-dir", "--chroma", "--state",
        "--index",
    ):
        assert needle in text, needle


_PROBE = """
import json, sys
from affect_memory.cli import main
try:
    main(["serve", "--help"])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def test_help_loads_neither_the_web_stack_nor_the_model_nor_chroma() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    heavy = {"starlette", "uvicorn", "chromadb", "onnxruntime", "tokenizers", "torch"}
    assert not loaded & heavy, sorted(loaded & heavy)


@pytest.mark.parametrize(
    ("arguments", "needles"),
    [
        (["--host", "10.1.2.3"], ["--host '10.1.2.3' is not loopback", "--token"]),
        (["--host", "example.org"], ["--host 'example.org' is not loopback"]),
        (["--port", "70000"], ["--port must be between 0 and 65535, got 70000"]),
        (["--port", "-1"], ["--port", "got -1"]),
        (["--token", "two words"], ["bearer token", "visible ASCII"]),
        (["--model", "openai"], ["--model openai needs --model-url"]),
        (["--model", "openai", "--model-url", "ftp://x/v1", "--model-name", "m"],
         ["--model openai:", "base_url"]),
        (["--model-url", "http://127.0.0.1:9/v1"], ["--model-url and --model-name go with"]),
        (["--timeout", "0"], ["--timeout"]),
        (["--collection", "a"], ["--collection"]),
        (["--chroma", "not-a-url"], ["--chroma takes a server URL"]),
    ],
)
def test_a_bad_setting_is_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], needles: list[str]
) -> None:
    data = tmp_path / "data"
    code = main(["serve", "--port", "0", "--data-dir", str(data), *arguments])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("affect-memory serve: "), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not data.exists()


def test_a_refused_token_is_never_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "s3cret with a space"
    assert main(["serve", "--data-dir", str(tmp_path), "--token", secret]) == 2
    captured = capsys.readouterr()
    assert secret not in captured.err + captured.out


def test_a_port_in_use_is_one_line_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = tmp_path / "data"
        assert main(["serve", "--port", str(port), "--data-dir", str(data)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert f"cannot listen on 127.0.0.1:{port} (--host, --port)" in lines[0]
    assert "in use" in lines[0]
    assert captured.out == "" and not data.exists()
