"""``affect-memory forget ID... --user-id USER``: delete one user's memories by id."""

from __future__ import annotations

import argparse
import json

from affect_memory.cli.store_options import add_store_arguments, open_memory

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``forget`` sub-command."""
    parser = commands.add_parser(
        "forget",
        help="delete a user's memories by id",
        description=(
            "Delete the memories with these ids from USER's memories; ids that user does not "
            "have are reported, not errors. --user-id is required: ids are per user, so the "
            "same id may name another user's memory, which forget never touches."
        ),
    )
    parser.add_argument("ids", nargs="+", metavar="ID", help="memory ids")
    parser.add_argument(
        "--user-id", required=True, metavar="USER", help="whose memories to delete (required)"
    )
    parser.add_argument("--json", action="store_true", help='print {"forgotten", "not_found"}')
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Delete and report which ids were removed and which were not found."""
    with open_memory(args, create=False) as memory:
        removed = memory.forget(args.ids, user_id=args.user_id)
    gone = set(removed)
    missing = [ident for ident in dict.fromkeys(args.ids) if ident not in gone]
    if args.json:
        print(json.dumps({"forgotten": list(removed), "not_found": missing}))
    else:
        line = f"forgot {len(removed)} memor{'y' if len(removed) == 1 else 'ies'}"
        if missing:
            line += f"; not found for {args.user_id!r}: {', '.join(missing)}"
        print(line)
    return 0
