"""``affect-memory conformance PATH...``: check the kernel against fixture files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``conformance`` sub-command."""
    parser = commands.add_parser(
        "conformance",
        help="check the kernel against fixture files in the reference schema",
        description=(
            "Validate kernel and trace fixture files strictly, run every case and trace step "
            "through the kernel and report per category. Exit 0 when all pass, 1 when any "
            "fails, 2 when a file cannot be used."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="fixture JSON files")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Validate every file, run them, print the report; 1 when anything failed."""
    from affect_memory.conformance.report import format_report
    from affect_memory.conformance.runner import run_conformance

    report = run_conformance([Path(path) for path in args.paths])
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, default=str, indent=2))
        print(f"{report.passed} passed, {report.failed} failed", file=sys.stderr)
    else:
        print(format_report(report))
    return 1 if report.failed else 0
