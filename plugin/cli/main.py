"""The ``affect-memory`` command line: a thin dispatcher over ``affect_memory.cli.commands``.

Nothing heavy is imported here or by registering the commands: each command imports what it
needs when it runs, so ``--help``, ``--version`` and the commands that need no model start
quickly and never load one.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["BROKEN_PIPE_STATUS", "build_parser", "main"]

BROKEN_PIPE_STATUS = 141
"""Exit status when the reader of stdout went away (``affect-memory stats | head``): 128 +
SIGPIPE, what a shell reports for a command a closed pipe ended."""

COMMAND_MODULES = (
    "demo",
    "ingest",
    "recall",
    "forget",
    "list",
    "export",
    "erase",
    "stats",
    "migrate",
    "adopt",
    "classify",
    "mcp",
    "serve",
    "chat",
    "conformance",
    "bench",
)
"""Sub-command modules under ``affect_memory.cli.commands``, in ``--help`` order."""


class _VersionAction(argparse.Action):
    """``--version``: like argparse's own, but the version is looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **options: Any) -> None:
        options.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, argparse.SUPPRESS, **options)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from affect_memory import __version__

        print(f"{parser.prog} {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="affect-memory",
        description="An affect-aware memory layer for AI agents.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"affect_memory.cli.commands.{name}").register(commands)
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
    """Run one command; a user's mistake exits 2 with one line on stderr, never a traceback.

    A reader of stdout that went away (``affect-memory stats | head -1``) ends the command
    quietly with ``BROKEN_PIPE_STATUS``, whether it left during the command or at the last flush.
    """
    try:
        try:
            return _run(argv)
        finally:  # also after --help's SystemExit: flush while the error can still be caught
            sys.stdout.flush()
    except BrokenPipeError:
        _detach_stdout()
        return BROKEN_PIPE_STATUS


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    from affect_memory.cli.formatting import error_line
    from affect_memory.kernel.errors import AffectMemoryError

    try:
        code: int = args.handler(args)
    except AffectMemoryError as error:
        print(error_line(args.command, error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"affect-memory {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


def _detach_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush cannot fail on the closed pipe.

    What Python's documentation of SIGPIPE recommends: the reader is gone, nothing is lost by
    dropping what is still buffered, and the exit stays quiet.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (a test's capture)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
