"""``affect-memory demo``: the main job on the embedded default, printed turn by turn."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from affect_memory.cli.store_options import default_data_dir

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` sub-command."""
    parser = commands.add_parser(
        "demo",
        help="ingest sample memories and run a scripted conversation through the engine",
        description=(
            "Recreate DATA_DIR/demo, ingest the sample memories, and run a multi-turn "
            "conversation through the embedding intent gate, Chroma retrieval, kernel ranking "
            "and appraisal, and the state store. Only the language model is scripted. Prints "
            "per turn the intent, PAD mood and octant, ranked memories with their score "
            "breakdown, and the presence line."
        ),
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data directory (default $AFFECT_MEMORY_HOME or ./.affect-memory); "
        "the demo recreates DATA_DIR/demo",
    )
    parser.add_argument(
        "--chroma",
        metavar="URL",
        default=None,
        help="use a Chroma server at http://HOST:PORT (a fresh collection) instead of the "
        "embedded store",
    )
    parser.add_argument(
        "--state",
        metavar="URL",
        default=None,
        help="the state store: a path, sqlite:////PATH or postgresql://USER@HOST:PORT/DB"
        "[?schema=NAME], with a fresh conversation id (default $AFFECT_MEMORY_STATE, else a "
        "fresh DATA_DIR/demo/state.db)",
    )
    parser.add_argument(
        "--memories",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="memories to ingest (default: the bundled sample memories)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print it."""
    from affect_memory.cli.demo import SAMPLE_MEMORIES, run_demo
    from affect_memory.state.location import STATE_ENV

    state, source = args.state, "--state"
    if state is None and os.environ.get(STATE_ENV):
        state, source = os.environ[STATE_ENV], f"${STATE_ENV}"
    run_demo(
        args.data_dir or default_data_dir(),
        chroma_url=args.chroma,
        state_url=state,
        state_source=source,
        memories_file=args.memories or SAMPLE_MEMORIES,
        out=sys.stdout,
        progress=sys.stderr.isatty(),
    )
    return 0
