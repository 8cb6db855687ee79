"""``affect-memory migrate``: move a store from one shared collection to one collection per user."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from affect_memory.cli.store_options import add_store_arguments, default_data_dir

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``migrate`` sub-command."""
    parser = commands.add_parser(
        "migrate",
        help="move an old single-collection store into one collection per user",
        description=(
            "Move the memories of a store in the old layout (every user in one collection "
            "named like --collection, default 'memories') into one collection per user: copy "
            "each row with its vector (nothing is re-embedded, unless a torn index lost it), "
            "verify every user's memories, "
            "then remove the old collection. Safe to interrupt and to run again: a rerun "
            "resumes, copying only what is missing. On a store already migrated it only "
            "reports the users."
        ),
    )
    add_store_arguments(parser, index=False)  # migrating moves Chroma rows only
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="an embedded Chroma directory to migrate, instead of DATA_DIR/chroma",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="N",
        help="rows per Chroma call (default 1,000)",
    )
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="show progress"
    )
    shown.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show progress"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Migrate, then print one line (or the JSON report)."""
    from affect_memory.errors import StoreError
    from affect_memory.memory.admin.migrate import MIGRATION_PAGE, migrate_store
    from affect_memory.memory.chroma.location import parse_location
    from affect_memory.redaction import redact_url

    if args.chroma is not None and args.store is not None:
        raise StoreError("pass --chroma URL or --store DIR, not both")
    if args.chroma is not None:
        location = parse_location(args.chroma)
        if location.kind != "http":
            raise StoreError(
                "--chroma takes a server URL such as http://127.0.0.1:8000, got "
                f"{redact_url(args.chroma)!r}"
            )
    else:
        directory = args.store or (args.data_dir or default_data_dir()) / "chroma"
        location = parse_location(str(directory))
    try:
        report = migrate_store(
            location,
            collection=args.collection,
            timeout=args.timeout,
            page=MIGRATION_PAGE if args.batch is None else args.batch,
            progress=args.progress,
        )
    except StoreError as error:  # the API's ``page`` is the flag --batch here
        if not str(error).startswith("page must "):
            raise
        raise StoreError(f"--batch{str(error).removeprefix('page')}") from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    users = len(report.users)
    plural = "s" if users != 1 else ""
    if report.status == "nothing":
        print(
            f"nothing to migrate: {report.location} is in the per-user layout already "
            f"({report.count:,} memories of {users:,} user{plural})"
        )
        return 0
    earlier = f", {report.already:,} of them by an earlier run" if report.already else ""
    print(
        f"migrated {report.count:,} memories of {users:,} user{plural} from collection "
        f"{report.collection!r} into one collection per user at {report.location}"
        f"{earlier}; the old collection is removed"
    )
    return 0
