"""The README's "Run a turn" example runs as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run_a_turn_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Run a turn\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Run a turn section has no python block"
    return match.group(1)


def test_the_run_a_turn_example_runs_and_prints_the_turn() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _run_a_turn_example()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == "VULNERABILITY -> That sounds hard. What happened?"
    assert lines[1].startswith("valence 0.15 joy 0.6")
    assert lines[2] == "here with you"
