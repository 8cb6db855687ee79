"""One worker of ``bench fleet``: a process standing in for a host, with its own connection pool.

It opens the shared stores (the PostgreSQL state store, the Chroma server and the memory
index), finishes the memory writes a killed worker left pending, then runs the turns the
parent sends over its pipe, one at a time, through an ``AffectEngine`` with retrieval and
``MemoryTurnEffects`` on; only the model is scripted. Per turn it reports when it holds the
conversation and when the turn committed (so the parent can kill it at either moment), then
the turn's timings split by store.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from affect_memory.bench.common import BENCH_NOW, TimedEmbedder

_T = TypeVar("_T")

START_PATIENCE = 120.0
"""Seconds a starting worker waits for an unreachable Chroma server before it gives up."""

__all__ = [
    "INTENTS",
    "WorkerConfig",
    "intent_of",
    "make_embedder",
    "message_for",
    "reply_for",
    "run_worker",
]

INTENTS = ("CASUAL", "CURIOSITY", "VULNERABILITY", "CHALLENGE", "APOLOGY", "NEGLECT", "ABUSE")
"""Intents the scripted gate cycles through; each message names its own."""

REPLY_CHUNKS = 3
"""Chunks of every scripted reply; the generation delay is spread over them."""


def message_for(text: str, conversation: str, dispatch: int) -> str:
    """The user message of one dispatched turn: unique, and naming the intent it gets."""
    return f"{text} [{conversation} #{dispatch}] {INTENTS[dispatch % len(INTENTS)]}"


def intent_of(message: str) -> str:
    """The intent a message of ``message_for`` names."""
    return message.rsplit(" ", 1)[1]


def reply_for(message: str) -> str:
    """The reply the scripted model streams to ``message``."""
    return f"re: {message}"


@dataclass(frozen=True)
class WorkerConfig:
    """What every worker of one run opens (picklable, for spawned processes)."""

    state_url: str
    chroma_url: str
    collection: str
    index_url: str | None
    started_at: float
    """Epoch seconds the run began; turn times are ``BENCH_NOW`` plus the time since."""
    generation_seconds: float
    pool_size: int = 2
    lock_timeout: float = 30.0
    log_dir: str | None = None
    """Where each worker's stderr goes (``worker-SLOT.log``); None keeps the parent's."""


class _TimedEffects:
    """``MemoryTurnEffects`` with the time spent applying items added up."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.topic: str = inner.topic
        self.elapsed = 0.0

    def plan(self, turn: Any) -> Sequence[Any]:
        """The wrapped effects' outbox items for ``turn``."""
        planned: Sequence[Any] = self.inner.plan(turn)
        return planned

    async def apply(self, items: Sequence[Any]) -> None:
        """Apply through the wrapped effects, timing it."""
        began = time.perf_counter()
        try:
            await self.inner.apply(items)
        finally:
            self.elapsed += time.perf_counter() - began


def make_embedder() -> Any:
    """The default embedder (the same model, and name, in every process of a run)."""
    import affect_memory

    factory = (
        getattr(affect_memory, "default_embedder", None)
        or affect_memory.SentenceTransformerEmbedder
    )
    return factory()


def run_worker(config: WorkerConfig, slot: int, conn: Connection) -> None:
    """Process entry point: serve turns from ``conn`` until told to stop.

    The model runs on one thread: the workers stand in for hosts with CPUs of their own, and
    on one machine many-threaded models in every worker would only fight over its cores.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if config.log_dir is not None:  # keep the parent's terminal for its own report
        log = os.open(os.path.join(config.log_dir, f"worker-{slot}.log"),
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # fmt: skip
        os.dup2(log, 2)
        os.close(log)
    # A killed process cannot clean up a multiprocessing lock: tqdm's would be reported as
    # leaked at the parent's exit, so progress bars here lock with a thread lock.
    import threading

    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    try:
        asyncio.run(_serve(config, slot, conn))
    except BaseException as error:  # reported to the parent, which stops the run
        with suppress(OSError):
            conn.send({"event": "error", "error": f"{type(error).__name__}: {error}"})
        raise SystemExit(1) from None


async def _serve(config: WorkerConfig, slot: int, conn: Connection) -> None:
    from affect_memory import ChromaMemory, MemoryTurnEffects, open_state_store
    from affect_memory.kernel import (
        AffectEngine,
        GateInput,
        GateResult,
        GenerateInput,
        ScriptedModel,
        ScriptedReply,
    )

    embedder = TimedEmbedder(make_embedder())
    observed: defaultdict[str, float] = defaultdict(float)
    options: dict[str, Any] = {} if config.index_url is None else {"index": config.index_url}

    def observe_memory(stage: str, seconds: float) -> None:
        if stage in JOURNAL_STAGES:  # the index's write journal around each Chroma write
            observed["index"] += seconds

    memory = await _when_up(
        lambda: ChromaMemory(
            config.chroma_url,
            collection=config.collection,
            embedder=embedder,
            observer=observe_memory,
            timeout=60.0,
            progress=False,
            **options,
        )
    )
    _time_index(memory, observed)
    store = open_state_store(
        config.state_url, pool_size=config.pool_size, lock_timeout=config.lock_timeout
    )
    effects = _TimedEffects(MemoryTurnEffects(memory))
    embedder.embed_query("warm up")  # load the model before reporting ready
    replay = await effects.inner.replay_pending(store)
    conn.send({"event": "ready", "slot": slot, "pid": os.getpid(), "replayed": replay.applied})

    delay = config.generation_seconds / REPLY_CHUNKS

    def classify(request: GateInput) -> GateResult:
        return GateResult(intent=intent_of(request.message), should_retrieve=True)

    def respond(request: GenerateInput) -> ScriptedReply:
        text = reply_for(request.message)
        third = len(text) // REPLY_CHUNKS
        chunks = (text[:third], text[third : 2 * third], text[2 * third :])
        return ScriptedReply(chunks=chunks, delay=delay)

    def clock() -> Any:
        return BENCH_NOW + timedelta(seconds=time.time() - config.started_at)

    meter = _TurnMeter(embedder, effects, observed)
    current: list[int] = [-1]

    def observe_engine(stage: str, seconds: float) -> None:
        meter.lap(stage, seconds)
        if stage == "lock":
            conn.send({"event": "holding", "dispatch": current[0]})
        elif stage == "commit":
            conn.send({"event": "committed", "dispatch": current[0]})

    engines: dict[str, Any] = {}
    try:
        while True:
            order = await asyncio.to_thread(conn.recv)
            if order["op"] == "stop":
                drained = 0
                if order.get("drain"):
                    drained = (await effects.inner.replay_pending(store)).applied
                conn.send({"event": "stopped", "drained": drained})
                return
            conversation, dispatch = order["conversation"], order["dispatch"]
            engine = engines.get(conversation)
            if engine is None:
                engine = engines[conversation] = AffectEngine(
                    model=ScriptedModel(classify=classify, respond=respond),
                    store=store,
                    conversation_id=conversation,
                    user_id=order["user"],
                    retriever=memory.retriever_for(order["user"]),
                    effects=[effects],
                    observer=observe_engine,
                    clock=clock,
                )
            current[0] = dispatch
            meter.start()
            began = time.perf_counter()
            try:
                await engine.turn(order["text"])
            except Exception as error:
                conn.send({"event": "failed", "dispatch": dispatch, "error": f"{error}"})
                continue
            total = time.perf_counter() - began
            conn.send(
                {
                    "event": "done",
                    "dispatch": dispatch,
                    "finished": time.time(),
                    "lock": meter.laps.get("lock", 0.0),
                    **meter.split(total),
                }
            )
    finally:
        store.close()
        memory.close()


INDEX_CALLS = (
    "lexical_search", "pool_search", "rehearsal", "newest_epoch", "record_recalls"
)  # fmt: skip
"""The memory index's calls on a turn's path, timed as the index's share."""

JOURNAL_STAGES = ("index_announce", "index_settle")
"""The memory's observer stages of the index's write journal (the reads are timed as calls)."""


async def _when_up(open_store: Callable[[], _T], *, patience: float = START_PATIENCE) -> _T:
    """``open_store()``, tried again while its server is unreachable, for up to ``patience``
    seconds: a host started during an outage waits for its servers rather than failing."""
    from affect_memory.errors import StoreUnavailableError

    give_up = time.monotonic() + patience
    pause = 0.2
    while True:
        try:
            return open_store()
        except StoreUnavailableError:
            if time.monotonic() + pause > give_up:
                raise
            await asyncio.sleep(pause)  # a back-off between attempts, not an ordering
            pause = min(2.0, pause * 2)


def _time_index(memory: Any, observed: defaultdict[str, float]) -> None:
    """Time the memory index's turn-path calls on this memory's index object, if it has one."""
    index = getattr(memory, "index", None)
    for name in INDEX_CALLS:
        method = getattr(index, name, None)
        if callable(method):
            setattr(index, name, _timed(method, observed))


def _timed(method: Any, observed: defaultdict[str, float]) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            observed["index"] += time.perf_counter() - began

    return timed


class _TurnMeter:
    """One turn's engine stage laps, and the embedder, index and apply totals at each lap."""

    def __init__(self, embedder: TimedEmbedder, effects: _TimedEffects, index: Any) -> None:
        self._embedder = embedder
        self._effects = effects
        self._index = index
        self.laps: dict[str, float] = {}
        self._marks: dict[str, tuple[float, float, float]] = {}

    def _totals(self) -> tuple[float, float, float]:
        return (self._embedder.elapsed_ns / 1e9, self._index["index"], self._effects.elapsed)

    def start(self) -> None:
        """A new turn begins."""
        self.laps.clear()
        self._marks = {"start": self._totals()}

    def lap(self, stage: str, seconds: float) -> None:
        """The engine finished ``stage`` in ``seconds``."""
        self.laps[stage] = seconds
        self._marks[stage] = self._totals()

    def _between(self, first: str, last: tuple[float, float, float]) -> tuple[float, ...]:
        began = self._marks.get(first, last)
        return tuple(end - start for start, end in zip(began, last, strict=True))

    def split(self, total: float) -> dict[str, Any]:
        """The turn's overhead (all but generation) split by who spent it.

        state: the store's lock wait, load, commit and marking the outbox item applied (the
        effects lap less applying it); index: the memory index's lexical search (with the
        pool's rows), recall counts, newest times and recall increments (``INDEX_CALLS``) and
        its write journal (``JOURNAL_STAGES``); embedding: the embedder; Chroma read: retrieval
        less its embedding and index time (so with the client's row mapping); Chroma write:
        applying the turn's writes less theirs; engine: the rest (gate, ranking, appraisal,
        prompt, bookkeeping).
        """
        laps, end = self.laps, self._totals()
        embedding, index, _ = self._between("start", end)
        read_embedding, read_index, _ = self._between("gate", self._marks.get("retrieve", end))
        write_embedding, write_index, applied = self._between("commit", end)
        overhead = total - laps.get("generate", 0.0)
        parts = {
            "state": laps.get("lock", 0.0) + laps.get("load", 0.0) + laps.get("commit", 0.0)
            + max(0.0, laps.get("effects", 0.0) - applied),
            "chroma_read": max(0.0, laps.get("retrieve", 0.0) - read_embedding - read_index),
            "chroma_write": max(0.0, applied - write_embedding - write_index),
            "index": index,
            "embedding": embedding,
        }  # fmt: skip
        parts["engine"] = max(0.0, overhead - sum(parts.values()))
        return {"total": total, "overhead": overhead, "parts": parts}
