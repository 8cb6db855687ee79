"""A separate process for the SQLite concurrency tests: run scripted turns, hang mid-stream, or
hold a turn mid-stream until a go file appears.

Run as ``python -m tests.plugin.state.sqlite_worker MODE --db PATH --conversation ID ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from affect_memory import SQLiteStateStore
from affect_memory.kernel.adapters import ScriptedModel, ScriptedReply
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.errors import StateStoreError
from affect_memory.kernel.protocols import GateInput, GateResult, GenerateInput

INTENTS = ("CASUAL", "CURIOSITY", "VULNERABILITY", "CHALLENGE", "APOLOGY", "NEGLECT", "ABUSE")


def message_for(worker: int, turn: int) -> str:
    """The user message of one turn; it names the intent the gate will return."""
    return f"w{worker} t{turn} {INTENTS[(worker * 3 + turn * 5) % len(INTENTS)]}"


def intent_of(message: str) -> str:
    """The intent a message of ``message_for`` names."""
    return message.rsplit(" ", 1)[1]


def reply_for(message: str) -> str:
    """The reply the scripted model streams to ``message``."""
    return f"re: {message}"


def _classify(request: GateInput) -> GateResult:
    # Lower-case on purpose: the engine must normalize it.
    return GateResult(intent=f" {intent_of(request.message).lower()} ")


def _model(delay: float) -> ScriptedModel:
    def respond(request: GenerateInput) -> ScriptedReply:
        return ScriptedReply(chunks=("re: ", request.message), delay=delay)

    return ScriptedModel(classify=_classify, respond=respond)


async def run_turns(args: argparse.Namespace) -> None:
    store = SQLiteStateStore(args.db)
    engine = AffectEngine(model=_model(args.delay), store=store, conversation_id=args.conversation)
    print("READY", flush=True)
    if args.go_file:
        go = Path(args.go_file)
        while not go.exists():
            await asyncio.sleep(0.005)
    for turn in range(args.start, args.start + args.turns):
        await engine.turn(message_for(args.worker, turn))
        if args.report:
            print(f"TURN {turn}", flush=True)
    store.close()
    print("DONE", flush=True)


async def hang(args: argparse.Namespace) -> None:
    store = SQLiteStateStore(args.db)
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


async def held(args: argparse.Namespace) -> None:
    """One turn that streams a chunk, then waits for ``--go-file`` before it finishes and commits.

    A commit the store refuses prints ``FAILED`` (the error goes to stderr) and exits with 3.
    """
    store = SQLiteStateStore(args.db)
    go, release = Path(args.go_file), asyncio.Event()

    async def watch() -> None:
        while not go.exists():
            await asyncio.sleep(0.005)
        release.set()

    model = ScriptedModel(
        classify=_classify,
        replies=[
            ScriptedReply(chunks=("re: ", message_for(args.worker, args.start)), pause=release)
        ],
    )
    engine = AffectEngine(model=model, store=store, conversation_id=args.conversation)
    watcher = asyncio.create_task(watch())
    try:
        await engine.turn(
            message_for(args.worker, args.start), on_token=lambda _: print("STREAMING", flush=True)
        )
    except StateStoreError as error:
        print("FAILED", flush=True)
        print(error, file=sys.stderr, flush=True)
        raise SystemExit(3) from None
    finally:
        watcher.cancel()
        store.close()
    print("DONE", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("turns", "hang", "held"))
    parser.add_argument("--db", required=True)
    parser.add_argument("--conversation", required=True)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--go-file", default="")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    modes = {"turns": run_turns, "hang": hang, "held": held}
    asyncio.run(modes[args.mode](args))
    print(f"ELAPSED {time.perf_counter() - started:.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
