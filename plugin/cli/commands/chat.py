"""``affect-memory chat``: an interactive conversation through the engine, memory and a real model.

Each line read from stdin is one turn: the embedding gate classifies it, Chroma retrieves the
user's memories, the kernel ranks and appraises, the OpenAI-compatible endpoint streams the
reply to stdout, and the state store (``--state``: SQLite or PostgreSQL) commits the turn;
the turn's memory writes go through the outbox (pending ones from an earlier run are replayed
first). A failed turn prints one line on stderr and commits nothing; the conversation goes on.
A run whose every turn failed (an unreachable endpoint, a wrong model name) exits 1, so a
script cannot mistake it for success.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from typing import Any, TextIO

from affect_memory.cli.formatting import error_line
from affect_memory.cli.store_options import (
    add_state_argument,
    add_store_arguments,
    check_store_arguments,
    open_memory,
    open_state,
)
from affect_memory.errors import ChatConfigError
from affect_memory.kernel.bounds import check_conversation_id
from affect_memory.kernel.errors import AffectMemoryError, InvalidInputError, shown
from affect_memory.redaction import redact_url

__all__ = ["MODEL_ENV", "MODEL_URL_ENV", "register", "run"]

MODEL_URL_ENV = "AFFECT_MEMORY_MODEL_URL"
"""Environment variable read when ``--model-url`` is not given."""

MODEL_ENV = "AFFECT_MEMORY_MODEL"
"""Environment variable read when ``--model`` is not given."""

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CONVENTIONAL = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
"""Read for an API key when ``--api-key-env`` is not given; unset means no key."""

QUIT = frozenset({"/quit", "/exit"})

_HOW = (
    "e.g. --model-url http://127.0.0.1:11434/v1 --model llama3.1 for Ollama, or the /v1 URL of "
    "a vLLM or llama.cpp server"
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``chat`` sub-command."""
    parser = commands.add_parser(
        "chat",
        help="chat through the engine with Chroma memory and an OpenAI-compatible model",
        description=(
            "Read one message per line from stdin and stream each reply to stdout. Every turn "
            "runs the embedding intent gate, retrieval from the user's memories, kernel "
            "ranking and appraisal, generation at --model-url, and one commit to the state "
            "store (--state, default $AFFECT_MEMORY_STATE, else DATA_DIR/state.db); the "
            "user's messages become memories. "
            "A failed turn is reported on stderr and not committed. End with /quit or end of "
            "input. Exit status: 0 when at least one turn was committed (or there was no "
            "input), 1 when every turn failed (e.g. the endpoint cannot be reached), 2 for bad "
            "arguments or an unusable store."
        ),
    )
    parser.add_argument(
        "--model-url",
        metavar="URL",
        help=f"an OpenAI-compatible base URL ending in /v1 (default ${MODEL_URL_ENV}); {_HOW}",
    )
    parser.add_argument("--model", metavar="NAME", help=f"the model name (default ${MODEL_ENV})")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help=f"environment variable holding the API key (default {DEFAULT_KEY_ENV}, if set)",
    )
    parser.add_argument("--user-id", default="me", help="whose memories (default 'me')")
    parser.add_argument(
        "--conversation-id", metavar="ID", help="the conversation (default USER_ID-chat)"
    )
    parser.add_argument(
        "--model-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds to wait for the model endpoint to connect or send more (default 60)",
    )
    add_store_arguments(parser)
    add_state_argument(parser)
    parser.set_defaults(handler=run)


def _settings(args: argparse.Namespace) -> tuple[str, str, str | None, str]:
    """The endpoint, the model name, the API key and where it came from, or a one-line
    ``ChatConfigError``."""
    url = args.model_url or os.environ.get(MODEL_URL_ENV)
    if not url:
        raise ChatConfigError(
            f"no model endpoint: pass --model-url URL --model NAME ({_HOW}), "
            f"or set {MODEL_URL_ENV} and {MODEL_ENV}"
        )
    model = args.model or os.environ.get(MODEL_ENV)
    if not model:
        raise ChatConfigError(
            f"no model name for {redact_url(url)}: pass --model NAME (e.g. llama3.1) or set "
            f"{MODEL_ENV}"
        )
    if args.api_key_env is None:
        return url, model, os.environ.get(DEFAULT_KEY_ENV) or None, f"${DEFAULT_KEY_ENV}"
    name = args.api_key_env
    if not _VARIABLE.fullmatch(name):  # perhaps the key itself, typed in the wrong place
        raise ChatConfigError(
            "--api-key-env takes the NAME of an environment variable holding the key (letters, "
            "digits and _), and what was given is not a valid variable name (not shown, as it "
            "may be the key itself)"
        )
    key = os.environ.get(name)
    if not key:
        named = name if _CONVENTIONAL.fullmatch(name) else "the variable it names (not shown)"
        raise ChatConfigError(f"--api-key-env names {named}, which is not set")
    shown_name = f"${name}" if _CONVENTIONAL.fullmatch(name) else "the --api-key-env variable"
    return url, model, key, shown_name


def run(args: argparse.Namespace) -> int:
    """Run the conversation until /quit or end of input."""
    url, model_name, api_key, key_source = _settings(args)
    if not isinstance(args.user_id, str) or not args.user_id.strip():
        raise ChatConfigError(f"--user-id must be a non-empty string, got {shown(args.user_id)}")
    conversation = args.conversation_id or f"{args.user_id}-chat"
    try:
        check_conversation_id(conversation)
    except InvalidInputError as error:
        detail = str(error).removeprefix("conversation_id")
        raise ChatConfigError(f"--conversation-id{detail}") from None
    check_store_arguments(args)  # before anything (the data directory, the state) is created
    from affect_memory.gate.classifier import EmbeddingIntentGate
    from affect_memory.models.embeddings import default_embedder
    from affect_memory.models.openai_adapter import OpenAICompatibleModel

    # Built before anything heavy loads, so a bad URL or timeout is refused at once. The
    # embedder is lazy, and the memory's own embedder shares the one loaded model.
    gate = EmbeddingIntentGate(default_embedder())
    try:
        model = OpenAICompatibleModel(
            url, model_name, api_key, gate=gate, timeout=args.model_timeout
        )
    except InvalidInputError as error:
        if str(error).startswith("api_key "):
            raise ChatConfigError(f"the API key in {key_source}: {error}") from None
        url_source = "--model-url" if args.model_url else f"${MODEL_URL_ENV}"
        for field, flag in (("timeout ", "--model-timeout "), ("base_url ", f"{url_source} ")):
            if str(error).startswith(field):
                raise ChatConfigError(f"{flag}{str(error).removeprefix(field)}") from None
        raise
    store = open_state(args)
    try:
        with open_memory(args, create=True) as memory:
            return asyncio.run(
                _converse(
                    memory,
                    model,
                    store,
                    user_id=args.user_id,
                    conversation_id=conversation,
                    lines=sys.stdin,
                    out=sys.stdout,
                    err=sys.stderr,
                )
            )
    finally:
        store.close()


async def _converse(
    memory: Any,
    model: Any,
    store: Any,
    *,
    user_id: str,
    conversation_id: str,
    lines: TextIO,
    out: TextIO,
    err: TextIO,
) -> int:
    from affect_memory.memory.turns.effects import MemoryTurnEffects
    from affect_memory.memory.turns.user_engine import user_engine
    from affect_memory.state.location import state_store_label

    async with model:
        replay = await MemoryTurnEffects(memory, user_id=user_id).replay_pending(store)
        if replay.applied or replay.failed:
            print(
                f"replayed {replay.applied} pending memory write(s)"
                + (f"; {replay.failed} still failing" if replay.failed else ""),
                file=err,
            )
        engine = user_engine(
            memory, model, store, user_id=user_id, conversation_id=conversation_id
        )
        print(
            f"chatting as {shown(user_id)} in {shown(conversation_id)} with {model.model} at "
            f"{model.base_url}; end with /quit or Ctrl-D",
            file=err,
            flush=True,
        )
        committed, failed = await _loop(engine, lines, out, err)
    where = state_store_label(store)
    if failed and not committed:
        print(
            f"affect-memory chat: all {failed} turn(s) failed and none was committed to "
            f"{where}; check --model-url {model.base_url} and --model {model.model}",
            file=err,
        )
        return 1
    print(
        f"{committed} turn(s) committed to {where}" + (f"; {failed} failed" if failed else ""),
        file=err,
    )
    return 0


async def _loop(engine: Any, lines: TextIO, out: TextIO, err: TextIO) -> tuple[int, int]:
    """Run one turn per input line; returns how many turns were committed and how many failed."""
    interactive = lines.isatty()
    committed = failed = 0
    while True:
        if interactive:
            print("you> ", end="", file=err, flush=True)
        line = await asyncio.to_thread(lines.readline)
        if not line:
            return committed, failed
        text = line.strip()
        if not text:
            continue
        if text in QUIT:
            return committed, failed
        streamed = [False]

        def show(chunk: str, streamed: list[bool] = streamed) -> None:
            streamed[0] = True
            out.write(chunk)
            out.flush()

        try:
            await engine.turn(text, on_token=show)
        except AffectMemoryError as error:
            if streamed[0]:
                out.write("\n")
                out.flush()
            print(f"{error_line('chat', error)} (turn not committed)", file=err, flush=True)
            failed += 1
            continue
        out.write("\n")
        out.flush()
        committed += 1
