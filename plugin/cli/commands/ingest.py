"""``affect-memory ingest FILE.jsonl``: validate every memory record, then store them all."""

from __future__ import annotations

import argparse
from pathlib import Path

from affect_memory.cli.store_options import add_store_arguments, open_memory

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ingest`` sub-command."""
    parser = commands.add_parser(
        "ingest",
        help="store memories from a JSON-lines file (one MemoryRecord per line)",
        description=(
            "Validate every line as a MemoryRecord (id, text, user_id, zoned timestamp, "
            "significance, episode, emotional_valence, recall_count, agent_id, "
            "conversation_id, last_recalled_at, extra) and store them, each user's in that "
            "user's collection. Bad lines exit 2 naming every line, field and value (the "
            "first 20), and nothing is written; a write that fails part way takes back what "
            "it stored. Ids a user already has are skipped, so ingesting a file twice is "
            "harmless; ids are per user."
        ),
    )
    parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="records, one per line")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="overwrite memories whose ids are already stored (resets their recall counts)",
    )
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Validate the whole file first, then write; print what was stored."""
    from affect_memory.memory.batches import read_records

    records = read_records(args.file)
    progress = False if args.no_progress else None
    with open_memory(args, create=True) as memory:
        if args.replace:
            report = memory.upsert(records, progress=progress)
        else:
            report = memory.add(records, progress=progress)
        where = f"collection {memory.collection_name!r} at {memory.location}"
    noun = "memory" if report.written == 1 else "memories"
    skipped = f", {len(report.skipped)} already stored and skipped" if report.skipped else ""
    print(f"ingested {report.written} {noun} into {where}{skipped}")
    return 0
