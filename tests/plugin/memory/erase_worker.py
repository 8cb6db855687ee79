"""An ``affect-memory erase`` that kills itself (SIGKILL) right after one step, for the
erasure kill tests.

Usage: python erase_worker.py STEP ARG... (ARG: the CLI's arguments after ``erase``)

STEP is ``state`` (the state store's transaction committed) or one of
``affect_memory.memory.erasure.ERASE_STEPS``; the step runs whole, then the process dies with
no clean-up, as a kill between two steps would leave it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from affect_memory.cli.commands import erase as erase_command
from affect_memory.cli.main import main
from affect_memory.memory import erasure

STEP_FUNCTIONS = {
    "intent": "record_intent",
    "collection": "drop_collection",
    "segments": "remove_segments",
    "index": "remove_index_rows",
}


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(step: str) -> None:
    """Wrap ``step`` so the process dies as soon as it has run."""
    if step == "state":
        module: Any = erase_command
        name = "_erase_state"
    else:
        module, name = erasure, STEP_FUNCTIONS[step]
    original = getattr(module, name)

    def then_die(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        _die()

    setattr(module, name, then_die)


if __name__ == "__main__":
    _arm(sys.argv[1])
    sys.exit(main(["erase", *sys.argv[2:]]))
