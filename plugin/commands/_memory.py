"""Arguments and helpers shared by the memory commands (ingest, recall, forget, stats)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernel.errors import InvalidInputError
from plugin.errors import RecordError

__all__ = [
    "DATA_DIR_ENV",
    "add_store_arguments",
    "default_data_dir",
    "open_memory",
    "read_jsonl",
]

DATA_DIR_ENV = "AFFECT_MEMORY_HOME"
"""Environment variable naming the default data directory."""


def default_data_dir() -> Path:
    """``$AFFECT_MEMORY_HOME`` or ``./.affect-memory``."""
    return Path(os.environ.get(DATA_DIR_ENV) or ".affect-memory")


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--data-dir``, ``--chroma`` and ``--collection``."""
    from plugin.chroma_memory import DEFAULT_COLLECTION

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
        help=f"Chroma collection (default {DEFAULT_COLLECTION})",
    )


def open_memory(args: argparse.Namespace, *, create: bool) -> Any:
    """The ``ChromaMemory`` the arguments name; read-only commands pass ``create=False``."""
    from plugin.chroma_client import parse_location
    from plugin.chroma_memory import ChromaMemory
    from plugin.errors import StoreError

    if args.chroma is not None:
        if parse_location(args.chroma).kind != "http":
            raise StoreError(
                f"--chroma takes a server URL such as http://127.0.0.1:8000, got {args.chroma!r} "
                "(use --data-dir for an embedded store)"
            )
        location: str | Path = args.chroma
    else:
        location = (args.data_dir or default_data_dir()) / "chroma"
    return ChromaMemory(location, collection=args.collection, create=create)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice")
        result[key] = value
    return result


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line; a bad line names its number.

    A key repeated within one object is refused: JSON parsers silently keep the last one,
    which would let ``{"user_id": "a", ..., "user_id": "b"}`` file a memory under another user.
    """
    try:
        handle = path.open(encoding="utf-8")
    except OSError as error:
        raise InvalidInputError(f"cannot read {path}: {error.strerror or error}") from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line, object_pairs_hook=_no_duplicate_keys)
                except ValueError as error:
                    raise RecordError(f"{path} line {number}: invalid JSON: {error}") from None
                if not isinstance(value, dict):
                    raise RecordError(
                        f"{path} line {number}: expected a JSON object, got {line.strip()[:80]!r}"
                    )
                yield number, value
        except UnicodeDecodeError as error:
            raise RecordError(f"{path}: not UTF-8 text ({error})") from None
