"""The main job, end to end: ingest sample memories, run a conversation, show state and evidence.

Everything is real except the language model, which is scripted (none is available offline):
the embedding intent gate classifies each message, Chroma retrieves, the kernel ranks and
appraises, the state store (a fresh SQLite file, or ``state_url``) commits, and the outbox
writes the turn's memories back.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from affect_memory.errors import StoreError
from affect_memory.formatting import format_table
from affect_memory.kernel import (
    AffectEngine,
    ScoredCandidate,
    TurnResult,
    mood_octant,
)
from affect_memory.kernel.adapters import DelegatingRetriever
from affect_memory.kernel.engine import DEFAULT_ENGINE_LIMITS
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.protocols import RankedRetriever, RetrievalInput
from affect_memory.memory.batches import read_records

if TYPE_CHECKING:
    from affect_memory.gate.scripted import GatedScriptedModel

__all__ = [
    "DEMO_CONVERSATION",
    "DEMO_NOW",
    "DEMO_USER",
    "DemoTurn",
    "run_demo",
]

SAMPLE_MEMORIES = Path(__file__).with_name("sample_memories.jsonl")
"""The demo's 40 memories (``fixtures/sample_memories.md`` describes them), shipped in the
package."""
DEMO_NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
"""The sample memories' reference date: the demo's conversation happens then."""
DEMO_USER = "alice"
_MARKER = ".affect-memory-demo"

DEMO_CONVERSATION: tuple[tuple[str, str], ...] = (
    ("Hi! It's me again.", "Hi Alice, good to hear from you."),
    (
        "Do you remember where I live now?",
        "You moved to Berlin a few days ago. Are the boxes unpacked yet?",
    ),
    (
        "Honestly I've been feeling lonely since the move, I miss my old life.",
        "That sounds hard. Moving cities leaves a gap, even when it was the right call.",
    ),
    (
        "You never listen, you're completely useless.",
        "I hear that you're frustrated. I'm still here.",
    ),
    ("Sorry, that was unfair of me. Rough day.", "Thank you for saying that. Rough days happen."),
    (
        "What was the name of my pet again?",
        "Miso, the grey cat you adopted. I'm sorry about Biscuit.",
    ),
)
"""The scripted user messages, each with the scripted model's reply."""


@dataclass(frozen=True)
class DemoTurn:
    """One turn of the demo as printed: the message, the gate's call and the engine's result."""

    message: str
    intent: str
    confidence: float
    retrieve: bool
    result: TurnResult
    distance_order: tuple[str, ...]
    """Every candidate Chroma returned for the turn, nearest first (empty without retrieval)."""
    presence: str


class _RecordingRetriever(DelegatingRetriever):
    """The user's retriever, also keeping the whole candidate pool of the latest retrieval.

    A ``DelegatingRetriever``, so the engine still takes recall's own ranking from it (the
    turn shows what ``affect-memory recall`` returns); the pool is fetched beside it, for the
    ``dist#`` column only.
    """

    def __init__(self, wrapped: RankedRetriever) -> None:
        """Record around ``wrapped`` (``ChromaMemory.retriever_for``)."""
        super().__init__(wrapped)
        self.pool: tuple[MemoryCandidate, ...] = ()

    async def retrieve_ranked(self, request: RetrievalInput) -> Sequence[ScoredCandidate]:
        """The wrapped retriever's ranking, as it is; its pool is kept in ``pool``."""
        limit = DEFAULT_ENGINE_LIMITS.max_retrieval_candidates
        whole = request.model_copy(update={"limit": limit})
        self.pool = tuple(await self.wrapped.retrieve(whole))
        ranked: Sequence[ScoredCandidate] = await self.wrapped.retrieve_ranked(request)
        return ranked


def _fresh_directory(path: Path) -> Path:
    try:
        if path.exists() or path.is_symlink():
            if any(path.iterdir()) and not (path / _MARKER).exists():
                raise StoreError(
                    f"{path} is not empty and was not made by the demo; pass another --data-dir"
                )
            shutil.rmtree(path)
        path.mkdir(parents=True)
        (path / _MARKER).write_text("made by `affect-memory demo`; safe to delete\n")
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise StoreError(
            f"cannot use {path} for the demo ({reason}: {error.filename or path}); "
            "pass a writable --data-dir"
        ) from None
    return path


def run_demo(
    data_dir: Path,
    *,
    chroma_url: str | None = None,
    state_url: str | None = None,
    state_source: str = "state_url",
    memories_file: Path = SAMPLE_MEMORIES,
    out: TextIO,
    progress: bool = False,
) -> list[DemoTurn]:
    """Run the demo in ``data_dir/demo`` (recreated each time) and print it to ``out``.

    The memories file and ``state_url`` (``state_source`` names it in errors) are checked
    before anything is created or removed. A state store of its own (``state_url``) gets a
    fresh conversation id, as a Chroma server gets a fresh collection.
    """
    from affect_memory.gate.classifier import EmbeddingIntentGate
    from affect_memory.gate.scripted import GatedScriptedModel
    from affect_memory.memory.store import ChromaMemory
    from affect_memory.memory.turns.effects import MemoryTurnEffects
    from affect_memory.models.embeddings import default_embedder
    from affect_memory.state.location import open_state_store, parse_state_url, state_store_label

    records = read_records(memories_file)
    if state_url is not None:
        parse_state_url(state_url, source=state_source)
    home = _fresh_directory(data_dir / "demo")
    embedder = default_embedder()
    location: str | Path = chroma_url or home / "chroma"
    stamp = f"{datetime.now(UTC):%Y%m%d%H%M%S%f}"
    collection = f"demo-{stamp}" if chroma_url else "memories"
    conversation = f"{DEMO_USER}-demo" + (f"-{stamp}" if state_url is not None else "")
    say = _printer(out)
    with (
        closing(open_state_store(state_url or home / "state.db", source=state_source)) as store,
        ChromaMemory(location, collection=collection, embedder=embedder) as memory,
    ):
        written = memory.add(records, progress=progress).written
        say(
            f"Ingested {written} sample memories ({memory.count(DEMO_USER)} of {DEMO_USER}) "
            f"into {memory.location}; the conversation happens at {DEMO_NOW:%Y-%m-%d %H:%M} UTC."
        )
        model = GatedScriptedModel(
            EmbeddingIntentGate(embedder), [reply for _, reply in DEMO_CONVERSATION]
        )
        clock = _stepping_clock(DEMO_NOW, timedelta(minutes=2))
        retriever = _RecordingRetriever(memory.retriever_for(DEMO_USER))
        engine = AffectEngine(
            model=model,
            store=store,
            conversation_id=conversation,
            retriever=retriever,
            effects=[MemoryTurnEffects(memory)],
            user_id=DEMO_USER,
            clock=clock,
        )
        before = memory.count(DEMO_USER)
        turns = asyncio.run(_converse(engine, model, retriever))
        for number, turn in enumerate(turns, start=1):
            _print_turn(say, number, turn)
        recalled = {
            record.id: record.recall_count
            for record in memory.get(
                {scored.candidate.id for turn in turns for scored in turn.result.memories},
                user_id=DEMO_USER,
            )
        }
        say("")
        say(
            f"Committed {len(turns)} turns to {state_store_label(store)}; "
            f"{memory.count(DEMO_USER) - before} user messages became new memories; "
            "recall counts now: "
            + ", ".join(f"{ident} {count}" for ident, count in sorted(recalled.items()))
            + "."
        )
    return turns


async def _converse(
    engine: AffectEngine, model: GatedScriptedModel, retriever: _RecordingRetriever
) -> list[DemoTurn]:
    turns: list[DemoTurn] = []
    for message, _ in DEMO_CONVERSATION:
        retriever.pool = ()
        result = await engine.turn(message)
        prediction = model.predictions[-1]
        presence = await engine.presence()
        by_distance: list[MemoryCandidate] = sorted(
            retriever.pool, key=lambda candidate: (candidate.distance, candidate.id)
        )
        turns.append(
            DemoTurn(
                message=message,
                intent=result.intent,
                confidence=prediction.confidence,
                retrieve=prediction.should_retrieve,
                result=result,
                distance_order=tuple(candidate.id for candidate in by_distance),
                presence=str(presence["line"]),
            )
        )
    return turns


def _stepping_clock(start: datetime, step: timedelta) -> Callable[[], datetime]:
    ticks = iter(range(1_000_000))
    return lambda: start + step * next(ticks)


def _printer(out: TextIO) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(line, file=out, flush=True)

    return say


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def _memory_rows(
    memories: Sequence[ScoredCandidate], by_distance: Sequence[str]
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for rank, scored in enumerate(memories, start=1):
        rows.append(
            [
                rank,
                by_distance.index(scored.candidate.id) + 1,
                _clip(scored.candidate.id, 26),
                round(scored.score, 3),
                round(scored.candidate.distance, 3),
                round(scored.recency, 3),
                round(scored.salience, 3),
                round(scored.congruence, 3),
                round(scored.episode_bonus, 3),
                _clip(scored.candidate.text, 44),
            ]
        )
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_turn(say: Callable[[str], None], number: int, turn: DemoTurn) -> None:
    result = turn.result
    mood = result.mood
    say("")
    say(f"── Turn {number} " + "─" * 60)
    say(f"  user      {turn.message}")
    say(
        f"  gate      {turn.intent} (confidence {turn.confidence:.2f}), "
        f"retrieve: {'yes' if turn.retrieve else 'no'}"
    )
    if result.memories:
        say(
            "  memories  ranked by the kernel; 'dist#' is the Chroma distance rank among all "
            f"{len(turn.distance_order)} candidates retrieved"
        )
        table = format_table(
            [
                "#",
                "dist#",
                "id",
                "score",
                "distance",
                "recency",
                "salience",
                "congr",
                "episode",
                "text",
            ],
            _memory_rows(result.memories, turn.distance_order),
        )
        for line in table.splitlines():
            say(f"    {line}")
    say(
        f"  mood      V {_signed(mood.valence)}  A {_signed(mood.arousal)}  "
        f"D {_signed(mood.dominance)}  → {mood_octant(mood)}"
    )
    strong = sorted(
        ((value, name) for name, value in result.emotions.items() if value > 0),
        key=lambda item: (-item[0], item[1]),
    )
    say("  emotions  " + (", ".join(f"{name} {value:.2f}" for value, name in strong) or "none"))
    say(f"  reply     {result.text}   (scripted model)")
    say(f"  presence  {turn.presence}")
