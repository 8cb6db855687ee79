"""The ``affect-memory`` dispatcher: version, per-command usage errors, one-line error output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import affect_memory as plugin
from affect_memory import kernel
from affect_memory.cli import main
from affect_memory.cli.main import BROKEN_PIPE_STATUS, COMMAND_MODULES

ROOT = Path(__file__).resolve().parents[3]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_version_is_the_distributions_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    installed = version("affect-memory")
    assert plugin.__version__ == kernel.__version__ == installed
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"affect-memory {installed}\n"


def test_python_dash_m_plugin_runs_the_cli() -> None:
    result = _run("-m", "affect_memory", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"affect-memory {version('affect-memory')}\n"
    usage = _run("-m", "affect_memory", "recall", "--bogus")
    assert usage.returncode == 2


@pytest.mark.parametrize(
    "argv", [["recall"], ["ingest", "memories.jsonl"], ["classify"], ["demo"], ["chat"]]
)
def test_an_unknown_flag_prints_the_subcommands_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    command = argv[0]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--bogus"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: affect-memory {command} ")
    last = err.splitlines()[-1]
    assert last == f"affect-memory {command}: error: unrecognized arguments: --bogus"


def test_a_long_bad_value_comes_back_as_a_short_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    huge = "x" * 100_000
    assert main(["chat", "--model-url", huge, "--model", "m", "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("affect-memory chat: ")
    assert "(100,000 characters)" in line or "(100000 characters)" in line
    assert len(line) < 500


# -- start-up: what each command imports, and a reader that goes away ----------------------------

_PROBE = """
import json, os, sys
from affect_memory.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exited:
    code = exited.code
with open(os.environ["PROBE_MODULES"], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""

_MODEL_STACK = ("torch", "transformers", "sentence_transformers", "onnxruntime", "tokenizers")


@pytest.fixture(scope="module")
def one_memory(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A data directory whose store holds one memory of alice's."""
    from affect_memory.memory.store import ChromaMemory

    data = tmp_path_factory.mktemp("one-memory")
    with ChromaMemory(data / "chroma", embedder=embedder, progress=False) as memory:
        memory.add(
            [
                {
                    "id": "m1",
                    "text": "I have a cat called Miso.",
                    "user_id": "alice",
                    "timestamp": "2026-11-30T12:00:00+00:00",
                }
            ]
        )
    return data


def _modules_of(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    out = tmp_path / "modules.json"
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        cwd=ROOT,
        env={**os.environ, "PROBE_MODULES": str(out)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    loaded: set[str] = set(json.loads(out.read_text()))
    return result.returncode, loaded


def _no_model_commands(data: Path) -> list[list[str]]:
    store = ["--data-dir", str(data)]
    commands = [
        ["--help"],
        ["--version"],
        ["stats", *store],
        ["stats", "--json", *store],
        ["forget", "no-such-id", "--user-id", "alice", *store],
        ["conformance", "fixtures/kernel_cases.json"],
        ["classify", ""],  # nothing to classify: CASUAL without the model
        ["recall", "--help"],
        ["mcp", "--help"],
        ["bench", "--help"],
    ]
    if "migrate" in COMMAND_MODULES:
        commands += [["migrate", "--help"], ["migrate", *store]]  # already per-user: a no-op
    return commands


def test_commands_that_need_no_model_load_none(tmp_path: Path, one_memory: Path) -> None:
    commands = _no_model_commands(one_memory)
    # Two lanes, as the start-ups dominate: the commands that open the (embedded, one process
    # at a time) store one after another, the others beside them, each with its own probe file.
    lanes = [
        [i for i, argv in enumerate(commands) if str(one_memory) in argv],
        [i for i, argv in enumerate(commands) if str(one_memory) not in argv],
    ]
    outcomes: dict[int, tuple[int, set[str]]] = {}

    def run_lane(lane: list[int]) -> None:
        for i in lane:
            (tmp_path / str(i)).mkdir()
            outcomes[i] = _modules_of(tmp_path / str(i), *commands[i])

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(run_lane, lanes))
    for i, argv in enumerate(commands):
        code, loaded = outcomes[i]
        assert code == 0, argv
        assert not loaded & set(_MODEL_STACK), (argv, sorted(loaded & set(_MODEL_STACK)))


@pytest.mark.parametrize(
    "argv",
    [["recall", "my pet", "--user-id", "alice"], ["classify", "I'm so sorry about yesterday"]],
)
def test_commands_that_embed_run_on_onnx_without_torch(
    tmp_path: Path, one_memory: Path, argv: list[str]
) -> None:
    store = ["--data-dir", str(one_memory)] if argv[0] == "recall" else []
    code, loaded = _modules_of(tmp_path, *argv, *store)
    assert code == 0
    assert "onnxruntime" in loaded
    assert not loaded & {"torch", "transformers", "sentence_transformers"}


@pytest.mark.parametrize(
    "argv", [["conformance", "fixtures/kernel_cases.json"], ["classify", ""], ["--help"]]
)
def test_a_reader_that_goes_away_ends_the_command_quietly(argv: list[str]) -> None:
    # `affect-memory ... | head -1` where head has already gone: no traceback, no noise.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "affect_memory", *argv],
            cwd=ROOT,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(writer)
    assert result.stderr == ""
    assert result.returncode in (0, BROKEN_PIPE_STATUS)
    if argv[0] != "--help":  # argparse itself ignores a failed write of the help
        assert result.returncode == BROKEN_PIPE_STATUS
