"""Arguments and helpers shared by the memory commands (ingest, recall, forget, stats)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_DIR_ENV",
    "add_store_arguments",
    "default_data_dir",
    "open_memory",
]

DATA_DIR_ENV = "AFFECT_MEMORY_HOME"
"""Environment variable naming the default data directory."""


def default_data_dir() -> Path:
    """``$AFFECT_MEMORY_HOME`` or ``./.affect-memory``."""
    return Path(os.environ.get(DATA_DIR_ENV) or ".affect-memory")


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--data-dir``, ``--chroma``, ``--collection`` and ``--timeout``."""
    from plugin.memory.layout import DEFAULT_COLLECTION
    from plugin.memory.location import DEFAULT_TIMEOUT

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


def open_memory(args: argparse.Namespace, *, create: bool) -> Any:
    """The ``ChromaMemory`` the arguments name; read-only commands pass ``create=False``."""
    from plugin.errors import StoreError
    from plugin.memory.location import parse_location
    from plugin.memory.store import ChromaMemory

    if args.chroma is not None:
        if parse_location(args.chroma).kind != "http":
            raise StoreError(
                f"--chroma takes a server URL such as http://127.0.0.1:8000, got {args.chroma!r} "
                "(use --data-dir for an embedded store)"
            )
        location: str | Path = args.chroma
    else:
        location = (args.data_dir or default_data_dir()) / "chroma"
    timeout = getattr(args, "timeout", None)
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    return ChromaMemory(location, collection=args.collection, create=create, **options)
