"""``affect-memory mcp``: serve the memory tools to an MCP client over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Coroutine
from typing import Any

from affect_memory.cli.store_options import (
    add_state_argument,
    add_store_arguments,
    default_data_dir,
    index_setting,
    open_memory,
    open_state,
)

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``mcp`` sub-command."""
    parser = commands.add_parser(
        "mcp",
        help="serve the memory tools to an MCP client over stdio (or streamable HTTP)",
        description=(
            "Run an MCP server on stdin/stdout (or, with --http, over streamable HTTP) with the "
            "tools remember, recall, forget, list_memories, export_memories, erase_user, "
            "appraise and presence. Memories live in Chroma (DATA_DIR/chroma, or --chroma), "
            "conversation state in --state (default $AFFECT_MEMORY_STATE, else "
            "DATA_DIR/state.db). The embedded Chroma store admits one "
            "process at a time: use --chroma to share memories with other processes. Logs go "
            "to stderr; stdout carries only the protocol."
        ),
    )
    add_store_arguments(parser)
    add_state_argument(parser)
    http = parser.add_argument_group(
        "streamable HTTP",
        "serve at http://HOST:PORT/mcp instead of stdio; a host that is not loopback needs a "
        "bearer token",
    )
    http.add_argument("--http", action="store_true", help="serve over streamable HTTP")
    http.add_argument(
        "--host", default=None, help="the address to listen on (default 127.0.0.1: this machine)"
    )
    http.add_argument(
        "--port", type=int, default=None, help="the port (default 8765; 0 picks a free one)"
    )
    http.add_argument(
        "--token",
        default=None,
        help="require Authorization: Bearer TOKEN (default: $AFFECT_MEMORY_MCP_TOKEN; prefer "
        "the variable, as a command line is visible to other users)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="stderr log level (default WARNING; INFO logs every refused call)",
    )
    parser.set_defaults(handler=run)


def _http_settings(args: argparse.Namespace) -> tuple[str, int, str | None] | None:
    """``--http``'s host, port and token, checked before anything loads; None for stdio."""
    from affect_memory.kernel.errors import InvalidInputError

    if not args.http:
        given = [name for name in ("host", "port", "token") if getattr(args, name) is not None]
        if given:
            raise InvalidInputError(f"--{given[0]} needs --http (stdio has no address)")
        return None
    from affect_memory.integrations.mcp_http import (
        DEFAULT_HTTP_HOST,
        DEFAULT_HTTP_PORT,
        TOKEN_ENV,
        check_http_settings,
    )

    host = DEFAULT_HTTP_HOST if args.host is None else args.host
    port = DEFAULT_HTTP_PORT if args.port is None else args.port
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    return host, port, check_http_settings(host, port, token)


def run(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin (or, over HTTP, until interrupted)."""
    from affect_memory.errors import StoreError
    from affect_memory.kernel.errors import shown
    from affect_memory.memory.chroma.location import parse_location
    from affect_memory.redaction import redact_url

    http = _http_settings(args)  # a non-loopback host without a token: exit 2 before loading

    if args.chroma is not None and parse_location(args.chroma).kind != "http":
        raise StoreError(
            "--chroma takes a server URL such as http://127.0.0.1:8000, got "
            f"{shown(redact_url(args.chroma))} "
            "(use --data-dir for an embedded store)"
        )
    open_state(args).close()  # a bad URL, a server that does not answer: exit 2 before serving
    _check_store(args)  # the same for --collection, --chroma and --index
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    from affect_memory.integrations.mcp_server import build_server
    from affect_memory.integrations.mcp_tools import ServerConfig

    config = ServerConfig(
        data_dir=args.data_dir or default_data_dir(),
        chroma_url=args.chroma,
        collection=args.collection,
        state_url=args.state,
        index_url=index_setting(args),
        timeout=args.timeout,
    )
    if http is not None:
        from affect_memory.integrations.mcp_http import serve_http

        host, port, token = http
        _serve(serve_http(config, host=host, port=port, token=token, log_level=args.log_level))
        return 0
    _serve(build_server(config, log_level=args.log_level).run_stdio_async())
    return 0


def _check_store(args: argparse.Namespace) -> None:
    """Open and close the memory the arguments name, so a bad ``--collection``, an unreachable
    ``--chroma`` or a bad or unreachable ``--index`` exits 2 in one line naming it, before the
    model loads (the server's own opening would end in a traceback)."""
    from affect_memory.errors import StoreError
    from affect_memory.memory.chroma.layout import check_prefix
    from affect_memory.memory.index.storage.opening import INDEX_ENV

    try:
        check_prefix(args.collection)
    except StoreError as error:
        raise StoreError(f"--collection: {error}") from None
    try:
        open_memory(args, create=True).close()
    except StoreError as error:
        message = str(error)
        if message.startswith(("--", "$")):
            raise
        if args.chroma is not None and "Chroma server" in message:
            raise type(error)(f"--chroma: {message}") from None
        if index_setting(args) is not None and "memory index" in message:
            source = "--index" if getattr(args, "index", None) is not None else f"${INDEX_ENV}"
            raise type(error)(f"{source}: {message}") from None
        raise


def _serve(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main``; a start-up failure the task groups wrap is raised as itself, one line."""
    from affect_memory.kernel.errors import AffectMemoryError

    try:
        asyncio.run(main)
    except BaseExceptionGroup as group:
        found = _first(group, AffectMemoryError)
        if found is None:
            raise
        raise found from None


def _first(group: BaseExceptionGroup[Any], kind: type[Exception]) -> Exception | None:
    """The first exception of ``kind`` in ``group``, however deeply nested."""
    for item in group.exceptions:
        if isinstance(item, kind):
            return item
        if isinstance(item, BaseExceptionGroup):
            found = _first(item, kind)
            if found is not None:
                return found
    return None
