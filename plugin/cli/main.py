"""The ``affect-memory`` command line: a thin dispatcher over ``plugin.cli.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kernel.errors import AffectMemoryError
from plugin import __version__
from plugin.cli.formatting import error_line

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
"""Sub-command modules under ``plugin.cli.commands``, in ``--help`` order."""

def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="affect-memory",
        description="An affect-aware memory layer for AI agents.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"plugin.cli.commands.{name}").register(commands)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown argument is reported with its sub-command's usage.

    argparse hands a sub-command's unknown arguments back to the top-level parser, which
    would print the top-level usage for ``affect-memory recall --bogus``.
    """
    args, extras = parser.parse_known_args(argv)
    if extras:
        chosen = _subcommand(parser, args.command)
        chosen.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a user's mistake exits 2 with one line on stderr, never a traceback."""
    parser = build_parser()
    args = _parse(parser, argv)
    try:
        code: int = args.handler(args)
    except AffectMemoryError as error:
        print(error_line(args.command, error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"affect-memory {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
