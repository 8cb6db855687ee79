"""The ``affect-memory`` command line: a thin dispatcher over ``plugin.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kernel.errors import AffectMemoryError

__all__ = ["build_parser", "main"]

COMMAND_MODULES = (
    "demo",
    "ingest",
    "recall",
    "forget",
    "stats",
    "classify",
    "mcp",
    "chat",
    "conformance",
    "bench",
)
"""Sub-command modules under ``plugin.commands``, in ``--help`` order."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="affect-memory",
        description="An affect-aware memory layer for AI agents.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"plugin.commands.{name}").register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a user's mistake exits 2 with one line on stderr, never a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except AffectMemoryError as error:
        print(f"affect-memory {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"affect-memory {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
