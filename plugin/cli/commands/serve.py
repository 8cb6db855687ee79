"""``affect-memory serve``: the HTTP API (``affect_memory.http``) over one store, until stopped.

Everything that can be refused is refused before the model loads, in one line: a host beyond
this machine without a token, a bad port, timeout, model choice or store option (before
anything is created), a port in use, an unreachable state store. Then the embedding model is
loaded, and once uvicorn accepts connections one line
``affect-memory serve: listening on http://HOST:PORT`` is printed on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from typing import Any

from affect_memory.cli.store_options import (
    add_state_argument,
    add_store_arguments,
    check_store_arguments,
    default_data_dir,
    open_memory,
    open_state,
)

__all__ = ["register", "run"]

API_KEY_ENV = "OPENAI_API_KEY"
"""Where ``--model openai`` reads its API key (unset: no key)."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` sub-command."""
    from affect_memory.http.exposure import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV

    parser = commands.add_parser(
        "serve",
        help="serve the HTTP API (memories, recall, users, conversations) over one store",
        description=(
            "Serve the JSON API at http://HOST:PORT/v1/... until interrupted: store, list, read "
            "and forget memories, recall with every score explained, export or erase a user, "
            "and run conversation turns through the engine. GET /openapi.json describes every "
            "endpoint; every error is an application/problem+json document naming the field. "
            "Loopback (127.0.0.1) by default; any other --host needs --token (or "
            f"${TOKEN_ENV}), and then every request but GET /v1/health (and, with "
            "--inspector, the inspector's page and assets) must send "
            "'Authorization: Bearer TOKEN'. Once it accepts connections it prints one line, "
            "'affect-memory serve: listening on http://HOST:PORT', on stdout."
        ),
    )
    parser.add_argument(
        "--host",
        default=None,
        help=f"the address to listen on (default {DEFAULT_HOST}: this machine)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0 picks a free one, printed at "
        "start)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"require 'Authorization: Bearer TOKEN' (default ${TOKEN_ENV}; prefer the "
        "variable: a command line is visible to other users of the machine)",
    )
    parser.add_argument(
        "--inspector", action="store_true", help="also serve the inspector's page at /"
    )
    parser.add_argument(
        "--model",
        choices=("scripted", "openai"),
        default="scripted",
        help="who answers conversation turns: 'scripted' (a fixed reply, for trying the API) "
        f"or 'openai', an OpenAI-compatible endpoint (--model-url, --model-name, key from "
        f"${API_KEY_ENV}) (default scripted)",
    )
    parser.add_argument("--model-url", metavar="URL", help="the endpoint's base URL ending in /v1")
    parser.add_argument("--model-name", metavar="NAME", help="the model the endpoint serves")
    parser.add_argument(
        "--print-openapi",
        action="store_true",
        help="print the OpenAPI document (docs/reference/openapi.json) and exit",
    )
    parser.add_argument(
        "--log-level",
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        default="WARNING",
        help="how much the server logs on stderr (default WARNING; never a token)",
    )
    add_store_arguments(parser)
    add_state_argument(parser)
    for action in parser._actions:  # the store's --timeout bounds every store call here
        if action.dest == "timeout":
            action.help = (
                "longest wait for one store call (and one Chroma server request); a request "
                "waiting longer answers 504 Gateway Timeout (default %(default)g)"
            )
    parser.set_defaults(handler=run)


def _model_choice(args: argparse.Namespace) -> Any:
    """The ``ModelChoice`` of ``--model``, checked: ``openai`` needs a URL and a name."""
    from affect_memory.errors import ChatConfigError
    from affect_memory.http.context import ModelChoice
    from affect_memory.kernel.errors import InvalidInputError

    if args.model == "scripted":
        if args.model_url is not None or args.model_name is not None:
            raise ChatConfigError("--model-url and --model-name go with --model openai")
        return ModelChoice()
    if not args.model_url or not args.model_name:
        raise ChatConfigError(
            "--model openai needs --model-url URL (e.g. http://127.0.0.1:11434/v1) and "
            "--model-name NAME"
        )
    choice = ModelChoice(
        "openai", args.model_url, args.model_name, os.environ.get(API_KEY_ENV) or None
    )
    try:
        choice.build(None)  # a malformed URL or key is refused now, not at the first turn
    except InvalidInputError as error:
        raise ChatConfigError(f"--model openai: {error}") from None
    return choice


def _state_url(args: argparse.Namespace) -> tuple[str, str]:
    """The state store's URL and where it came from, checked by opening it once."""
    from affect_memory.state.location import STATE_ENV, default_state_url

    open_state(args).close()  # a bad URL or a server that does not answer: exit 2 now
    if args.state is not None:
        return args.state, "--state"
    url = default_state_url(args.data_dir or default_data_dir())
    return url, f"${STATE_ENV}" if os.environ.get(STATE_ENV) else "the default state file"


def run(args: argparse.Namespace) -> int:
    """Check every setting, load the model, then serve until interrupted."""
    from affect_memory.http.exposure import (
        DEFAULT_HOST,
        DEFAULT_PORT,
        TOKEN_ENV,
        check_serve_settings,
    )

    if args.print_openapi:
        from affect_memory.http.openapi import openapi_document

        sys.stdout.write(json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n")
        return 0
    host = DEFAULT_HOST if args.host is None else args.host
    port = DEFAULT_PORT if args.port is None else args.port
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    token = check_serve_settings(host, port, token)  # before anything loads or binds
    model = _model_choice(args)
    check_store_arguments(args)
    try:
        from affect_memory.http.context import ServerContext
    except ImportError as error:
        from affect_memory.errors import MissingExtraError

        raise MissingExtraError(
            "the HTTP API needs the 'http' extra: pip install -c constraints.txt "
            f"'affect-memory[http]' ({error})"
        ) from None
    from affect_memory.redaction import install_log_redaction, remember_secrets

    remember_secrets([secret for secret in (token, model.api_key) if secret])
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    install_log_redaction(
        ["httpx", "httpcore", "psycopg", "psycopg.pool", "affect_memory", "uvicorn.error"]
    )
    from affect_memory.http.app import create_app
    from affect_memory.http.server import listening_socket, serve

    with listening_socket(host, port) as bound:  # a port in use: one line, before the model
        state_url, state_source = _state_url(args)
        memory = open_memory(args, create=True)
        try:
            memory.embedder.embed_documents(["warm up"])  # load the model before listening
            context = ServerContext(
                memory, state_url=state_url, state_source=state_source, timeout=args.timeout,
                model=model,
            )
        except BaseException:
            memory.close()
            raise
        try:
            replay = asyncio.run(context.replay_pending())
            if replay.applied or replay.failed:
                print(
                    f"affect-memory serve: replayed {replay.applied} pending memory write(s)"
                    + (f"; {replay.failed} still failing" if replay.failed else ""),
                    file=sys.stderr,
                )
            app = create_app(context, inspector=args.inspector, token=token)
            asyncio.run(serve(app, bound, log_level=args.log_level.lower()))
        finally:
            context.close()
    return 0
