"""The ``affect-memory`` dispatcher: version, per-command usage errors, one-line error output."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import kernel
import plugin
from kernel.errors import InvalidInputError
from plugin.cli import main
from plugin.cli.formatting import MAX_ERROR_CHARS, error_line

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
    result = _run("-m", "plugin", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"affect-memory {version('affect-memory')}\n"
    usage = _run("-m", "plugin", "recall", "--bogus")
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


def test_an_error_line_is_one_line_and_cut_when_too_long() -> None:
    error = InvalidInputError("query must be short:\n" + "x" * 100_000)
    line = error_line("recall", error)
    assert "\n" not in line
    assert line.startswith("affect-memory recall: query must be short: xxx")
    assert len(line) < MAX_ERROR_CHARS + 60
    assert line.endswith(f"(line cut; {100_000 + 43:,} characters)")
    assert error_line("recall", InvalidInputError("short")) == "affect-memory recall: short"


def test_a_long_bad_value_comes_back_as_a_short_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    huge = "x" * 100_000
    assert main(["chat", "--model-url", huge, "--model", "m", "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("affect-memory chat: ")
    assert "(100,000 characters)" in line or "(100000 characters)" in line
    assert len(line) < 500
