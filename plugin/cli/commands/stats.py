"""``affect-memory stats``: memories per user, the collections' distance space and size."""

from __future__ import annotations

import argparse
import json

from affect_memory.cli.store_options import add_store_arguments, open_memory

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stats`` sub-command."""
    parser = commands.add_parser(
        "stats",
        help="memories per user, distance space, HNSW settings and size on disk",
        description=(
            "Report the memories under the collection prefix: counts per user (one Chroma "
            "collection each, listed by the users' real ids), space, HNSW and size on disk."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the stats as JSON")
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the stats as a table or JSON."""
    from affect_memory.formatting import format_table

    with open_memory(args, create=False) as memory:
        stats = memory.stats()
    if args.json:
        print(json.dumps(stats.to_json(), indent=2))
        return 0
    hnsw = ", ".join(f"{key}={value}" for key, value in stats.hnsw.items())
    size = "n/a (server or in-memory)" if stats.size_bytes is None else f"{stats.size_bytes:,} B"
    collections = f"{stats.collections} user collection{'s' if stats.collections != 1 else ''}"
    print(
        f"collection {stats.collection!r} at {stats.location}: {collections}\n"
        f"space {stats.space} ({hnsw}); embedder {stats.embedder}; size {size}\n"
    )
    rows = [[user, count] for user, count in stats.users.items()]
    rows.append(["(total)", stats.count])
    print(format_table(["user_id", "memories"], rows))
    return 0
