"""``affect-memory erase --user-id USER --yes``: erase every trace of one user."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from affect_memory.cli.store_options import add_state_argument, add_store_arguments, open_memory

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``erase`` sub-command."""
    parser = commands.add_parser(
        "erase",
        help="erase every memory and every conversation of a user",
        description=(
            "Erase USER's memories: their Chroma collection and every row of theirs in the "
            "memory index (documents, postings, recall counts, journal). Their conversations "
            "too (state, transcript and outbox items) in the state store --state names, else "
            "$AFFECT_MEMORY_STATE's, else DATA_DIR/state.db when that file exists. Crash-safe: a "
            "run killed "
            "at any step is finished by the next open of the store or by running erase again. "
            "Other users, even with the same memory ids, are untouched. Needs --yes."
        ),
    )
    parser.add_argument(
        "--user-id", required=True, metavar="USER", help="whose data to erase (required)"
    )
    parser.add_argument("--yes", action="store_true", help="really erase (required)")
    parser.add_argument("--json", action="store_true", help="print what was erased as JSON")
    add_store_arguments(parser)
    add_state_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Refuse without --yes; else erase the conversations (one transaction) of the state
    store there is, then the memories."""
    from affect_memory.memory.results import check_user

    user_id = check_user(args.user_id)
    if not args.yes:
        print(
            f"affect-memory erase: nothing was erased; pass --yes to erase every memory of "
            f"{user_id!r}",
            file=sys.stderr,
        )
        return 2
    state: dict[str, Any] | None = None
    if _has_state(args):
        state = _erase_state(args, user_id)
    with open_memory(args, create=True) as memory:
        report = memory.erase_user(user_id)
    if args.json:
        print(
            json.dumps(
                {"user_id": user_id, "memories": report.memories, "state": state},
                ensure_ascii=False,
            )
        )
        return 0
    line = (
        f"erased user {user_id!r}: {report.memories} memor{'y' if report.memories == 1 else 'ies'}"
    )
    if state is not None:
        line += (
            f", {len(state['conversations'])} conversation(s) with {state['messages']} "
            f"message(s) and {state['outbox_items']} outbox item(s)"
        )
    print(line)
    return 0


def _has_state(args: argparse.Namespace) -> bool:
    """Whether a state store is named (--state, ``$AFFECT_MEMORY_STATE``) or the default file
    exists: erasing never creates an empty store just to find nothing in it."""
    from affect_memory.state.location import STATE_ENV, default_state_url

    if args.state is not None or os.environ.get(STATE_ENV):
        return True
    return Path(default_state_url(args.data_dir)).exists()


def _erase_state(args: argparse.Namespace, user_id: str) -> dict[str, Any]:
    from affect_memory.cli.store_options import open_state

    store = open_state(args)
    try:
        erased = asyncio.run(store.erase_user(user_id))
    finally:
        store.close()
    return {
        "conversations": list(erased.conversations),
        "messages": erased.messages,
        "outbox_items": erased.outbox_items,
    }
