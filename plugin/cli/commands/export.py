"""``affect-memory export --user-id USER [--out FILE]``: a user's memories as JSON lines."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from affect_memory.cli.store_options import add_store_arguments, open_memory

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``export`` sub-command."""
    parser = commands.add_parser(
        "export",
        help="export a user's memories as JSON lines that ingest reads back",
        description=(
            "Write every memory of USER, one JSON record per line, oldest first, with its "
            "recall count and last-recalled time (the index's): 'affect-memory ingest FILE' "
            "into an empty store gives the same records and counts. To stdout, or to --out "
            "FILE, written whole to a temporary file first and renamed into place."
        ),
    )
    parser.add_argument(
        "--user-id", required=True, metavar="USER", help="whose memories to export (required)"
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="write here instead of stdout")
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check the user and the output's folder first, then write every line."""
    from affect_memory.kernel.errors import InvalidInputError
    from affect_memory.memory.export import write_jsonl
    from affect_memory.memory.results import check_user

    user_id = check_user(args.user_id)
    out: Path | None = args.out
    if out is not None and (out.is_dir() or not out.absolute().parent.is_dir()):
        raise InvalidInputError(f"--out must be a file in an existing folder, got {str(out)!r}")
    with open_memory(args, create=True) as memory:
        if out is None:
            written = write_jsonl(memory.export(user_id), sys.stdout)
        else:
            partial = out.with_name(f".{out.name}.partial")
            try:
                with partial.open("w", encoding="utf-8") as handle:
                    written = write_jsonl(memory.export(user_id), handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(partial, out)
            finally:
                partial.unlink(missing_ok=True)
    if out is not None:
        noun = "memory" if written == 1 else "memories"
        print(f"exported {written} {noun} of {user_id!r} to {out}", file=sys.stderr)
    return 0
