"""``affect-memory mcp``: serve the memory tools to an MCP client over stdio."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from affect_memory.cli.store_options import (
    add_state_argument,
    add_store_arguments,
    default_data_dir,
    index_setting,
    open_state,
)

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``mcp`` sub-command."""
    parser = commands.add_parser(
        "mcp",
        help="serve remember/recall/forget/appraise/presence to an MCP client over stdio",
        description=(
            "Run an MCP server on stdin/stdout with the tools remember, recall, forget, "
            "appraise and presence. Memories live in Chroma (DATA_DIR/chroma, or --chroma), "
            "conversation state in --state (default DATA_DIR/state.db). The embedded Chroma "
            "store admits one "
            "process at a time: use --chroma to share memories with other processes. Logs go "
            "to stderr; stdout carries only the protocol."
        ),
    )
    add_store_arguments(parser)
    add_state_argument(parser)
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="stderr log level (default WARNING; INFO logs every refused call)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin."""
    from affect_memory.errors import StoreError
    from affect_memory.kernel.errors import shown
    from affect_memory.memory.location import parse_location

    if args.chroma is not None and parse_location(args.chroma).kind != "http":
        raise StoreError(
            f"--chroma takes a server URL such as http://127.0.0.1:8000, got {shown(args.chroma)} "
            "(use --data-dir for an embedded store)"
        )
    open_state(args).close()  # a bad URL, a server that does not answer: exit 2 before serving
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
    )
    asyncio.run(build_server(config, log_level=args.log_level).run_stdio_async())
    return 0
