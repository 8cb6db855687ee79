"""``affect-memory adopt NAME``: read a collection another tool wrote as memories, or import it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from affect_memory.cli.store_options import add_store_arguments, default_data_dir, index_setting

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``adopt`` sub-command."""
    parser = commands.add_parser(
        "adopt",
        help="survey a collection another tool wrote (LangChain, LlamaIndex), or import it",
        description=(
            "Survey a Chroma collection written by another tool as affect-memory would read it: "
            "its rows, their users, the defaults the rows get for affect metadata they lack "
            "(significance 0.5, no episode, emotional valence 0, recall count 0) and the rows "
            "that cannot be memories. Nothing is written. With --import, add its rows to the "
            "users' own collections (re-embedded, ids kept); the collection stays unchanged. "
            "Name each row's user with --user-field, or give the whole collection to --owner."
        ),
    )
    parser.add_argument("name", metavar="NAME", help="the collection to adopt")
    users = parser.add_mutually_exclusive_group(required=True)
    users.add_argument("--user-field", metavar="KEY", help="metadata key naming each row's user")
    users.add_argument("--owner", metavar="USER", help="the user the whole collection belongs to")
    parser.add_argument("--timestamp-field", metavar="KEY", help="metadata key of the timestamp")
    parser.add_argument(
        "--default-timestamp", metavar="TIME", help="timestamp of rows without one (ISO-8601)"
    )
    parser.add_argument(
        "--assume-utc", action="store_true", help="read timestamps without a zone as UTC"
    )
    for name, default in (
        ("significance", "significance"),
        ("valence", "emotional_valence"),
        ("episode", "episode"),
        ("recall-count", "recall_count"),
    ):
        parser.add_argument(
            f"--{name}-field", metavar="KEY", default=default, help=f"(default {default})"
        )
    parser.add_argument(
        "--import",
        dest="import_rows",
        action="store_true",
        help="add the rows to the users' own collections under --collection",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Survey (or import), then print a summary."""
    from affect_memory.errors import StoreError
    from affect_memory.kernel.errors import shown
    from affect_memory.memory.admin.adopt import ADOPTION_DEFAULTS, AdoptedCollection, FieldMapping
    from affect_memory.memory.chroma.location import parse_location
    from affect_memory.memory.timestamps import normalize_timestamp
    from affect_memory.redaction import redact_url

    if args.chroma is not None:
        if parse_location(args.chroma).kind != "http":
            raise StoreError(
                "--chroma takes a server URL such as http://127.0.0.1:8000, got "
                f"{redact_url(args.chroma)!r}"
            )
        location = str(args.chroma)
    else:
        location = str((args.data_dir or default_data_dir()) / "chroma")
    if args.default_timestamp is not None:  # named as typed, before the store is opened
        normalize_timestamp(args.default_timestamp, field="--default-timestamp")
    fields = FieldMapping(
        timestamp=args.timestamp_field,
        user=args.user_field,
        significance=args.significance_field,
        emotional_valence=args.valence_field,
        episode=args.episode_field,
        recall_count=args.recall_count_field,
        assume_utc=args.assume_utc,
    )
    with AdoptedCollection(
        location, args.name, fields=fields, owner=args.owner,
        default_timestamp=args.default_timestamp, timeout=args.timeout,
        check_space=not args.import_rows,
    ) as adopted:  # fmt: skip
        if args.import_rows:
            return _import(args, adopted, location)
        survey = adopted.survey()
    if args.json:
        print(json.dumps(survey.to_json(), indent=2))
        return 0
    dimension = "" if survey.dimension is None else f", {survey.dimension}-dimensional vectors"
    who = f"field {args.user_field!r}" if args.user_field else "--owner"
    users = ", ".join(
        f"{user if user.isprintable() else shown(user)} {count:,}"
        for user, count in sorted(survey.users.items())
    )
    defaults = ", ".join(
        f"{key} {ADOPTION_DEFAULTS[key]!r} on {count:,}" for key, count in survey.defaulted.items()
    )
    print(f"collection {args.name!r} at {survey.location}: {survey.rows:,} rows{dimension}")
    print(f"users ({who}): {users or 'none'}")
    print(f"defaults for rows without them: {defaults}")
    print(f"left out: {survey.left_out_count:,} rows", end="")
    first = next(iter(survey.left_out.items()), None)
    print("" if first is None else f" (first: {first[0]!r}: {first[1]})")
    print(
        "nothing was written; recall it with affect_memory.AdoptedCollection, or import it "
        "with --import"
    )
    return 0


def _import(args: argparse.Namespace, adopted: Any, location: str) -> int:
    from affect_memory.memory.store import ChromaMemory

    with ChromaMemory(
        location, collection=args.collection, timeout=args.timeout, index=index_setting(args)
    ) as memory:
        report = adopted.import_into(memory, progress=None)
        users = len(memory.stats().users)
    if args.json:
        print(json.dumps({"written": report.written, "already": report.already,
                          "left_out": report.left_out_count,
                          "left_out_examples": report.left_out}, indent=2))  # fmt: skip
        return 0
    noun = "memory" if report.written == 1 else "memories"
    print(
        f"imported {report.written:,} {noun} into the collections under {args.collection!r} "
        f"at {location} ({users:,} users now; {report.already:,} already there, "
        f"{report.left_out_count:,} left out); {args.name!r} is unchanged"
    )
    return 0
