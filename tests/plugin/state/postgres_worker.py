"""A separate process for the PostgreSQL store tests: run scripted turns, or hang mid-stream.

Run as ``python -m tests.plugin.state.postgres_worker MODE --url URL --schema S --conversation ID``.
Each process opens its own store (its own connection pool), as a worker on another host would.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from affect_memory.kernel.adapters import ScriptedModel, ScriptedReply
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.protocols import GateInput, GateResult, GenerateInput
from affect_memory.state.postgres import PostgresStateStore
from tests.plugin.state.sqlite_worker import intent_of, message_for


def _classify(request: GateInput) -> GateResult:
    return GateResult(intent=intent_of(request.message))


def _model(delay: float) -> ScriptedModel:
    def respond(request: GenerateInput) -> ScriptedReply:
        return ScriptedReply(chunks=("re: ", request.message), delay=delay)

    return ScriptedModel(classify=_classify, respond=respond)


def _store(args: argparse.Namespace) -> PostgresStateStore:
    return PostgresStateStore(
        args.url, schema=args.schema, pool_size=2, lock_timeout=args.lock_timeout
    )


async def run_turns(args: argparse.Namespace) -> None:
    store = _store(args)
    engine = AffectEngine(model=_model(args.delay), store=store, conversation_id=args.conversation)
    print("READY", flush=True)
    if args.go_file:
        go = Path(args.go_file)
        while not go.exists():
            await asyncio.sleep(0.005)
    for turn in range(args.start, args.start + args.turns):
        await engine.turn(message_for(args.worker, turn))
    store.close()
    print("DONE", flush=True)


async def hang(args: argparse.Namespace) -> None:
    store = _store(args)
    never = asyncio.Event()
    model = ScriptedModel(
        classify=_classify,
        replies=[ScriptedReply(chunks=("partial ", "never sent"), pause=never, pause_after=1)],
    )
    engine = AffectEngine(model=model, store=store, conversation_id=args.conversation)

    def on_token(chunk: str) -> None:
        print("STREAMING", flush=True)

    await engine.turn(message_for(args.worker, args.start), on_token=on_token)
    raise AssertionError("the paused reply must never finish")


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the chosen mode."""
    parser = argparse.ArgumentParser(prog="postgres_worker")
    parser.add_argument("mode", choices=["turns", "hang"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--conversation", required=True)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--go-file", default="")
    parser.add_argument("--lock-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    asyncio.run(run_turns(args) if args.mode == "turns" else hang(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
