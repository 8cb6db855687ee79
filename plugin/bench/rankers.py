"""The retrieval systems the quality benchmarks compare, over any set of conversations.

Each ranks one conversation's questions (a user's memories, already ingested) and returns
memory ids, best first, one list per question, through the product's public API, so every
system is paired on the same store and the same embeddings:

* ``cosine``: Chroma's nearest memories in distance order, plain vector search (the pool of
  ``ChromaMemory.candidates`` under ``DENSE_RECALL``, whose distances are Chroma's);
* ``BM25 (plain)``: the protocol's BM25 baseline, unstemmed (``affect_memory.bench.plain_bm25``);
* ``BM25 (index)``: the memory index's own lexical search alone (it folds and stems);
* ``RRF (BM25 + cosine)``: reciprocal-rank fusion of the two plain retrievers
  (``1 / (60 + rank)`` summed over each one's best 64);
* ``dense recall (before)``: ``recall`` with ``DENSE_RECALL`` (the nearest 32, calendar
  recency, the kernel's default weights);
* ``recall (default)``: ``recall`` with its defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from tqdm import tqdm

from affect_memory.bench.plain_bm25 import PlainBm25
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, DENSE_RECALL, RecallSettings
from affect_memory.memory.store import ChromaMemory

__all__ = [
    "CUTOFF",
    "STANDARD_SYSTEMS",
    "Conversation",
    "Question",
    "Ranker",
    "bm25_ranker",
    "cosine_ranker",
    "plain_bm25_ranker",
    "recall_ranker",
    "reciprocal_rank_fusion",
    "rrf_ranker",
]


class Question(Protocol):
    """A question a benchmark asks."""

    @property
    def text(self) -> str:
        """The question as asked."""
        ...


class Conversation(Protocol):
    """One user's memories (memory records) and the questions asked of them at ``now``."""

    @property
    def user_id(self) -> str:
        """The user the memories are stored under."""
        ...

    @property
    def records(self) -> Sequence[dict[str, Any]]:
        """The memory records (``id`` and ``text`` at least)."""
        ...

    @property
    def questions(self) -> Sequence[Question]:
        """The questions, in order."""
        ...

    @property
    def now(self) -> datetime:
        """The instant the questions are asked at."""
        ...


CUTOFF = 10
"""Every system returns its best 10 memories per question (the metrics stop at 10)."""

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack et al. 2009): a rank r counts 1 / (60 + r)."""

RRF_DEPTH = 64
"""How many of each retriever's best memories reciprocal-rank fusion reads."""

Ranker = Callable[[ChromaMemory, Conversation, bool], list[list[str]]]
"""Ranks one conversation's questions: memory ids, best first, one list per question."""


def _bar(items: Sequence[Any], label: str, progress: bool) -> Any:
    return tqdm(items, desc=label, unit="q", disable=not progress, leave=False)


def _nearest(memory: ChromaMemory, conversation: Conversation, text: str, n: int) -> list[str]:
    """The ids of Chroma's ``n`` nearest of the user's memories to ``text``, nearest first: the
    dense pool of ``ChromaMemory.candidates``, whose distances are Chroma's, by distance."""
    pool = memory.candidates(
        text, conversation.user_id, now=conversation.now, candidates=n, settings=DENSE_RECALL
    )
    return [candidate.id for candidate in sorted(pool, key=lambda c: c.distance)]


def cosine_ranker(
    memory: ChromaMemory, conversation: Conversation, progress: bool
) -> list[list[str]]:
    """Plain vector search: Chroma's nearest memories in distance order."""
    return [
        _nearest(memory, conversation, q.text, CUTOFF)
        for q in _bar(conversation.questions, f"cosine {conversation.user_id}", progress)
    ]


def bm25_ranker(
    memory: ChromaMemory, conversation: Conversation, progress: bool
) -> list[list[str]]:
    """Plain lexical search: the memory index's BM25 ranking alone."""
    return [
        list(memory.index.lexical_search(conversation.user_id, q.text, CUTOFF).ids)
        for q in _bar(conversation.questions, f"BM25 {conversation.user_id}", progress)
    ]


def plain_bm25_ranker(
    memory: ChromaMemory, conversation: Conversation, progress: bool
) -> list[list[str]]:
    """The protocol's plain BM25 over the conversation's texts (no embeddings, no store)."""
    index = PlainBm25(
        [r["id"] for r in conversation.records], [r["text"] for r in conversation.records]
    )
    return [
        index.top(q.text, CUTOFF)
        for q in _bar(conversation.questions, f"plain BM25 {conversation.user_id}", progress)
    ]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], limit: int) -> list[str]:
    """The ``limit`` ids with the highest ``sum 1 / (RRF_K + rank)`` over ``rankings`` (rank
    1 first; ties by first appearance)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, ident in enumerate(ranking, start=1):
            scores[ident] = scores.get(ident, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda ident: -scores[ident])[:limit]


def rrf_ranker(memory: ChromaMemory, conversation: Conversation, progress: bool) -> list[list[str]]:
    """Reciprocal-rank fusion of plain BM25 and cosine, each one's best ``RRF_DEPTH``."""
    index = PlainBm25(
        [r["id"] for r in conversation.records], [r["text"] for r in conversation.records]
    )
    user = conversation.user_id
    return [
        reciprocal_rank_fusion(
            [
                index.top(q.text, RRF_DEPTH),
                _nearest(memory, conversation, q.text, RRF_DEPTH),
            ],
            CUTOFF,
        )
        for q in _bar(conversation.questions, f"RRF {user}", progress)
    ]


def recall_ranker(settings: RecallSettings) -> Ranker:
    """``recall`` with ``settings``, all of a conversation's questions in one batch."""

    def rank(memory: ChromaMemory, conversation: Conversation, progress: bool) -> list[list[str]]:
        questions = conversation.questions
        ranked: list[list[str]] = []
        step = 50
        bar = tqdm(
            total=len(questions),
            desc=f"recall {conversation.user_id}",
            unit="q",
            disable=not progress,
            leave=False,
        )
        with bar:
            for start in range(0, len(questions), step):
                batch = [
                    {"query": q.text, "user_id": conversation.user_id}
                    for q in questions[start : start + step]
                ]
                results = memory.recall_many(
                    batch, now=conversation.now, top_k=CUTOFF, settings=settings
                )
                ranked.extend([hit.id for hit in result.results] for result in results)
                bar.update(len(batch))
        return ranked

    return rank


STANDARD_SYSTEMS: dict[str, Ranker] = {
    "cosine": cosine_ranker,
    "BM25 (plain)": plain_bm25_ranker,
    "BM25 (index)": bm25_ranker,
    "RRF (BM25 + cosine)": rrf_ranker,
    "dense recall (before)": recall_ranker(DENSE_RECALL),
    "recall (default)": recall_ranker(DEFAULT_RECALL_SETTINGS),
}
"""The systems the benchmark compares, in table order."""
