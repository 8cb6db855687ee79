"""The ``affect-memory`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kernel.errors import AffectMemoryError

__all__ = ["main"]


def _conformance(args: argparse.Namespace) -> int:
    from plugin.conformance_cli import format_report, run_conformance

    report = run_conformance([Path(path) for path in args.paths])
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, default=str, indent=2))
        print(f"{report.passed} passed, {report.failed} failed", file=sys.stderr)
    else:
        print(format_report(report))
    return 1 if report.failed else 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="affect-memory",
        description="An affect-aware memory layer for AI agents.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    conformance = commands.add_parser(
        "conformance",
        help="check the kernel against fixture files in the reference schema",
        description=(
            "Validate kernel and trace fixture files strictly, run every case and trace step "
            "through the kernel and report per category. Exit 0 when all pass, 1 when any "
            "fails, 2 when a file cannot be used."
        ),
    )
    conformance.add_argument("paths", nargs="+", metavar="PATH", help="fixture JSON files")
    conformance.add_argument("--json", action="store_true", help="print the report as JSON")
    conformance.set_defaults(handler=_conformance)
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
