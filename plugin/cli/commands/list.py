"""``affect-memory list --user-id USER``: one page of a user's memories, oldest first."""

from __future__ import annotations

import argparse
import json

from affect_memory.cli.store_options import add_store_arguments, open_memory

__all__ = ["PREVIEW_CHARS", "parse_count", "register", "run"]

PREVIEW_CHARS = 60
"""Characters of a memory's text the table shows (``--json`` has the whole text)."""


def parse_count(text: str, flag: str, *, minimum: int, maximum: int | None = None) -> int:
    """``text`` as an integer in [``minimum``, ``maximum``]; one line naming ``flag`` if not."""
    from affect_memory.kernel.errors import InvalidInputError, shown

    bound = f"in [{minimum}, {maximum}]" if maximum is not None else f"of at least {minimum}"
    try:
        value = int(text, 10)
    except ValueError:
        raise InvalidInputError(f"{flag} must be an integer {bound}, got {shown(text)}") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise InvalidInputError(f"{flag} must be an integer {bound}, got {value}")
    return value


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``list`` sub-command."""
    parser = commands.add_parser(
        "list",
        help="list a user's memories, a page at a time",
        description=(
            "Print one page of USER's memories, oldest timestamp first, then by id (a stable "
            "order: pages neither overlap nor skip while nothing is written), with the index's "
            "recall counts. --json prints each record whole, one JSON object per line, as "
            "'affect-memory ingest' reads them."
        ),
    )
    parser.add_argument(
        "--user-id", required=True, metavar="USER", help="whose memories to list (required)"
    )
    parser.add_argument("--limit", default="50", metavar="N", help="memories per page (1-1000)")
    parser.add_argument("--offset", default="0", metavar="N", help="memories to skip first")
    parser.add_argument("--json", action="store_true", help="one JSON record per line")
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check the page first, then read and print it."""
    from affect_memory.formatting import format_table
    from affect_memory.memory.export import MAX_LIST_LIMIT, record_line
    from affect_memory.memory.results import check_user

    user_id = check_user(args.user_id)
    limit = parse_count(args.limit, "--limit", minimum=1, maximum=MAX_LIST_LIMIT)
    offset = parse_count(args.offset, "--offset", minimum=0)
    with open_memory(args, create=True) as memory:
        records = memory.list(user_id, limit=limit, offset=offset)
        total = memory.count(user_id)
    if args.json:
        for record in records:
            print(json.dumps(record_line(record), ensure_ascii=False))
        return 0
    rows = [
        (
            record.timestamp[:19].replace("T", " "),
            record.id,
            record.recall_count,
            record.significance,
            _preview(record.text),
        )
        for record in records
    ]
    if rows:
        print(format_table(("timestamp (UTC)", "id", "recalls", "significance", "text"), rows))
    shown_to = offset + len(records)
    span = f"{offset + 1}-{shown_to}" if records else "none"
    print(f"{span} of {total} memories of {user_id!r}")
    return 0


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"
