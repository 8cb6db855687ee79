"""Arguments and helpers shared by the commands that open a store: the memory (ingest, recall,
forget, list, export, erase, stats, migrate, adopt, chat, mcp, serve) and the conversation state
(chat, mcp, serve, erase)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from affect_memory.data_dir import DATA_DIR_ENV, default_data_dir

__all__ = [
    "DATA_DIR_ENV",
    "add_state_argument",
    "add_store_arguments",
    "check_store_arguments",
    "default_data_dir",
    "index_setting",
    "open_memory",
    "open_state",
]

def add_store_arguments(parser: argparse.ArgumentParser, *, index: bool = True) -> None:
    """Add ``--data-dir``, ``--chroma``, ``--collection``, ``--timeout`` and, unless ``index``
    is False (a command that never opens the memory index), ``--index``."""
    from affect_memory.memory.chroma.layout import DEFAULT_COLLECTION
    from affect_memory.memory.chroma.location import DEFAULT_TIMEOUT

    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"data directory (default ${DATA_DIR_ENV} or ./.affect-memory); "
        "the embedded Chroma store lives in DATA_DIR/chroma",
    )
    parser.add_argument(
        "--chroma",
        metavar="URL",
        default=None,
        help="use a Chroma server (`chroma run`) at http://HOST:PORT instead of the embedded "
        "store; needed when several processes share memories",
    )
    parser.add_argument(
        "--collection",
        default=DEFAULT_COLLECTION,
        metavar="NAME",
        help=f"prefix of the Chroma collections, one per user, named NAME.<user>.<hash> "
        f"(default {DEFAULT_COLLECTION})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"longest wait for one Chroma server request (default {DEFAULT_TIMEOUT:g})",
    )
    if not index:
        return
    parser.add_argument(
        "--index",
        metavar="URL",
        default=None,
        help="the memory index (lexical search and recall counts): postgresql://USER@HOST/DB"
        "[?schema=NAME] for several hosts, or a SQLite file path (default $AFFECT_MEMORY_INDEX, "
        "else a file in the embedded store, or in DATA_DIR beside a --chroma server: one host)",
    )


def add_state_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--state URL``: the conversation state store (default ``$AFFECT_MEMORY_STATE``)."""
    parser.add_argument(
        "--state",
        metavar="URL",
        default=None,
        help="the conversation state store: a file path or sqlite:////ABSOLUTE/PATH for one host, "
        "postgresql://USER@HOST:PORT/DB[?schema=NAME] for several (default "
        "$AFFECT_MEMORY_STATE, else DATA_DIR/state.db)",
    )


def open_state(args: argparse.Namespace) -> Any:
    """The state store ``--state``, ``$AFFECT_MEMORY_STATE`` or ``DATA_DIR/state.db`` names."""
    from affect_memory.state.location import open_state_store

    if args.state is not None:
        return open_state_store(args.state, source="--state")
    return open_state_store(data_dir=args.data_dir or default_data_dir())


def index_setting(args: argparse.Namespace) -> str | None:
    """``--index``, else ``$AFFECT_MEMORY_INDEX``, else None (the store's default index)."""
    from affect_memory.memory.index.storage.opening import INDEX_ENV

    chosen = getattr(args, "index", None)
    return chosen if chosen is not None else os.environ.get(INDEX_ENV) or None


def check_store_arguments(args: argparse.Namespace) -> None:
    """Refuse a malformed ``--collection``, ``--timeout``, ``--chroma`` or ``--index`` in one
    line naming the flag, before a command creates anything (its data directory, a state)."""
    from affect_memory.errors import StoreError
    from affect_memory.memory.chroma.layout import check_prefix
    from affect_memory.memory.chroma.location import check_timeout, parse_location
    from affect_memory.memory.index.storage.opening import resolve_index
    from affect_memory.redaction import redact_url

    for flag, field, check in (
        ("--collection", "collection name (the prefix of every user's collection)", check_prefix),
        ("--timeout", "timeout", check_timeout),
    ):
        value = getattr(args, flag[2:], None)
        if value is None:
            continue
        try:
            check(value)
        except StoreError as error:
            raise StoreError(f"{flag}{str(error).removeprefix(field)}") from None
    if args.chroma is not None and parse_location(args.chroma).kind != "http":
        raise StoreError(
            "--chroma takes a server URL such as http://127.0.0.1:8000, got "
            f"{redact_url(args.chroma)!r} (use --data-dir for an embedded store)"
        )
    index = index_setting(args)
    if index is not None:
        source = "--index" if getattr(args, "index", None) is not None else "$AFFECT_MEMORY_INDEX"
        location = args.chroma or str((args.data_dir or default_data_dir()) / "chroma")
        try:
            resolve_index(index, parse_location(location))
        except StoreError as error:
            raise StoreError(f"{source}: {error}") from None


def open_memory(args: argparse.Namespace, *, create: bool) -> Any:
    """The ``ChromaMemory`` the arguments name; ``create=False`` refuses a store that does not
    exist yet (recall, forget, stats)."""
    from affect_memory.errors import StoreError
    from affect_memory.memory.chroma.location import parse_location
    from affect_memory.memory.store import ChromaMemory
    from affect_memory.redaction import redact_url

    if args.chroma is not None:
        if parse_location(args.chroma).kind != "http":
            raise StoreError(
                "--chroma takes a server URL such as http://127.0.0.1:8000, got "
                f"{redact_url(args.chroma)!r} "
                "(use --data-dir for an embedded store)"
            )
        location: str | Path = args.chroma
    else:
        location = (args.data_dir or default_data_dir()) / "chroma"
    timeout = getattr(args, "timeout", None)
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    index = index_setting(args)
    if index is not None:  # a malformed setting is one line naming where it came from
        from affect_memory.memory.index.storage.opening import resolve_index

        source = "--index" if getattr(args, "index", None) is not None else "$AFFECT_MEMORY_INDEX"
        try:
            resolve_index(index, parse_location(str(location)))
        except StoreError as error:
            raise StoreError(f"{source}: {error}") from None
    return ChromaMemory(
        location, collection=args.collection, create=create, index=index, **options
    )
