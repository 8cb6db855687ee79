"""``affect-memory bench locomo``: retrieval quality on LoCoMo through the product's public API.

Every conversation is ingested into a real Chroma store through ``ChromaMemory.add`` (its
lexical index filled by the same writes), and each question is asked of six systems, paired
on the same embeddings (every text is embedded once, and the vectors are cached on disk):

* ``cosine``: Chroma's nearest memories (``ChromaMemory.candidates``), plain vector search;
* ``BM25 (plain)``: the protocol's BM25 baseline, unstemmed (``plugin.bench.plain_bm25``),
  the one the issue's goal is judged against;
* ``BM25 (index)``: the memory index's own lexical search alone (it folds and stems);
* ``RRF (BM25 + cosine)``: reciprocal-rank fusion of the two plain retrievers, the fusion
  baseline the issue sets (``1 / (60 + rank)`` summed over each one's best 64);
* ``dense recall (before)``: ``recall`` with ``DENSE_RECALL``, the ranking before issue 12
  (the nearest 32, calendar recency, the kernel's default weights);
* ``recall (default)``: ``recall`` with its defaults.

It prints MRR@10, R@1/5/10 and hit@5 per system, overall and per category, MRR@10 by the age
of the evidence, and how many evidence memories the default candidate pool holds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kernel.errors import InvalidInputError
from kernel.retrieval import SECONDS_PER_DAY
from plugin.bench.common import add_json_option, load_average, machine, print_report
from plugin.bench.embedding_cache import CachedEmbedder
from plugin.bench.locomo_data import LocomoConversation, load_locomo
from plugin.bench.locomo_metrics import (
    QuestionScore,
    format_locomo_report,
    question_score,
    summarize,
)
from plugin.bench.plain_bm25 import PlainBm25
from plugin.memory.settings import DEFAULT_RECALL_SETTINGS, DENSE_RECALL, RecallSettings
from plugin.memory.store import ChromaMemory
from plugin.models.cache import cache_dir
from plugin.models.embeddings import default_embedder

__all__ = [
    "DEFAULT_DATA",
    "STANDARD_SYSTEMS",
    "Ranker",
    "bm25_ranker",
    "cosine_ranker",
    "measure_locomo",
    "plain_bm25_ranker",
    "recall_ranker",
    "reciprocal_rank_fusion",
    "register",
    "rrf_ranker",
]

DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo-dev"
"""Where the dev half lies beside the repository (``../shared/data/locomo-dev``)."""

CUTOFF = 10
"""Every system returns its best 10 memories per question (the metrics stop at 10)."""

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack et al. 2009): a rank r counts 1 / (60 + r)."""

RRF_DEPTH = 64
"""How many of each retriever's best memories reciprocal-rank fusion reads."""

Ranker = Callable[[ChromaMemory, LocomoConversation, bool], list[list[str]]]
"""Ranks one conversation's questions: memory ids, best first, one list per question."""


def _bar(items: Sequence[Any], label: str, progress: bool) -> Any:
    return tqdm(items, desc=label, unit="q", disable=not progress, leave=False)


def cosine_ranker(
    memory: ChromaMemory, conversation: LocomoConversation, progress: bool
) -> list[list[str]]:
    """Plain vector search: Chroma's nearest memories in distance order."""
    return [
        [c.id for c in memory.candidates(q.text, conversation.user_id, candidates=CUTOFF)]
        for q in _bar(conversation.questions, f"cosine {conversation.user_id}", progress)
    ]


def bm25_ranker(
    memory: ChromaMemory, conversation: LocomoConversation, progress: bool
) -> list[list[str]]:
    """Plain lexical search: the memory index's BM25 ranking alone."""
    return [
        list(memory.index.lexical_search(conversation.user_id, q.text, CUTOFF).ids)
        for q in _bar(conversation.questions, f"BM25 {conversation.user_id}", progress)
    ]


def plain_bm25_ranker(
    memory: ChromaMemory, conversation: LocomoConversation, progress: bool
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


def rrf_ranker(
    memory: ChromaMemory, conversation: LocomoConversation, progress: bool
) -> list[list[str]]:
    """Reciprocal-rank fusion of plain BM25 and cosine, each one's best ``RRF_DEPTH``."""
    index = PlainBm25(
        [r["id"] for r in conversation.records], [r["text"] for r in conversation.records]
    )
    user = conversation.user_id
    return [
        reciprocal_rank_fusion(
            [
                index.top(q.text, RRF_DEPTH),
                [c.id for c in memory.candidates(q.text, user, candidates=RRF_DEPTH)],
            ],
            CUTOFF,
        )
        for q in _bar(conversation.questions, f"RRF {user}", progress)
    ]


def recall_ranker(settings: RecallSettings) -> Ranker:
    """``recall`` with ``settings``, all of a conversation's questions in one batch."""

    def rank(
        memory: ChromaMemory, conversation: LocomoConversation, progress: bool
    ) -> list[list[str]]:
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


def _evidence_ages(conversation: LocomoConversation) -> list[float]:
    epochs = conversation.epochs()
    now = conversation.now.timestamp()
    return [
        min((now - epochs[ident]) / SECONDS_PER_DAY for ident in q.evidence)
        for q in conversation.questions
    ]


def _pool_coverage(
    memory: ChromaMemory,
    conversations: Sequence[LocomoConversation],
    settings: RecallSettings,
    progress: bool,
) -> dict[str, Any]:
    evidence = held = members = questions = 0
    for conversation in conversations:
        for q in _bar(conversation.questions, f"pool {conversation.user_id}", progress):
            pool = memory.pool_candidates(
                q.text, conversation.user_id, now=conversation.now, settings=settings
            )
            ids = {candidate.id for candidate in pool}
            evidence += len(q.evidence)
            held += sum(ident in ids for ident in q.evidence)
            members += len(ids)
            questions += 1
    return {
        "evidence": evidence,
        "in_pool": held,
        "coverage": round(held / evidence, 4) if evidence else 0.0,
        "mean_size": round(members / questions, 1) if questions else 0.0,
    }


def measure_locomo(
    data: Path,
    *,
    conversations: Sequence[str] = (),
    questions: int | None = None,
    systems: Mapping[str, Ranker] = STANDARD_SYSTEMS,
    coverage: RecallSettings | None = DEFAULT_RECALL_SETTINGS,
    cache: Path | None = None,
    keep: Path | None = None,
    progress: bool = False,
    per_question: bool = False,
) -> dict[str, Any]:
    """Ingest the conversations, rank every question with every system, and report.

    ``coverage`` is the settings whose candidate pool is checked for the evidence (None:
    skip); ``per_question`` adds each question's scores per system (for plots).
    """
    load_before = load_average()
    loaded = load_locomo(data, conversations=conversations, questions=questions)
    embedder = CachedEmbedder(default_embedder(), cache or _default_cache())
    with tempfile.TemporaryDirectory(prefix="affect-memory-locomo-") as scratch:
        location = (keep or Path(scratch)) / "chroma"
        with ChromaMemory(location, embedder=embedder, progress=False) as memory:
            for conversation in loaded:
                memory.add(list(conversation.records), progress=False)
            embedder.save()
            scores: dict[str, list[QuestionScore]] = {}
            seconds: dict[str, float] = {}
            for name, ranker in systems.items():
                start = time.perf_counter()
                scores[name] = []
                for conversation in loaded:
                    ranked = ranker(memory, conversation, progress)
                    for q, ids, age in zip(
                        conversation.questions, ranked, _evidence_ages(conversation), strict=True
                    ):
                        scores[name].append(
                            question_score(
                                ids, q.evidence, category=q.category, evidence_age_days=age
                            )
                        )
                seconds[name] = round(time.perf_counter() - start, 1)
            pool = None if coverage is None else _pool_coverage(memory, loaded, coverage, progress)
            embedder.save()
    report: dict[str, Any] = {
        "benchmark": "locomo",
        "data": str(data),
        "conversations": [c.user_id for c in loaded],
        "questions": sum(len(c.questions) for c in loaded),
        "memories": sum(len(c.records) for c in loaded),
        "embedder": embedder.name,
        "systems": {name: summarize(found) for name, found in scores.items()},
        "pool": pool,
        "seconds": seconds,
        "machine": machine(load_before),
    }
    if per_question:
        report["per_question"] = {
            name: [
                {"category": s.category, "evidence_age_days": round(s.evidence_age_days, 3),
                 "mrr_at_10": s.mrr_at_10, "r_at_10": s.r_at_10}
                for s in found
            ]
            for name, found in scores.items()
        }  # fmt: skip
    return report


def _default_cache() -> Path:
    return cache_dir() / "bench-locomo"


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench locomo``."""
    parser = benchmarks.add_parser(
        "locomo",
        help="retrieval quality on LoCoMo: cosine, BM25, RRF, the dense and the default recall",
        description=(
            "Ingest LoCoMo conversations (one user each) into a fresh Chroma store and ask "
            "every question of plain cosine search, plain BM25, their reciprocal-rank fusion, "
            "the dense recall of before and the default recall, on the same embeddings; print "
            "MRR@10, R@1/5/10 and hit@5 per system and per category, MRR@10 by the age of the "
            "evidence, and how much evidence the default candidate pool holds."
        ),
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        metavar="DIR",
        help=f"the folder of LoCoMo conversation files (default {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--conversations", default="", metavar="IDS", help="only these, e.g. 30,42 (default all)"
    )
    parser.add_argument(
        "--questions", type=int, default=None, metavar="N", help="the first N per conversation"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the embeddings are cached (default: the user cache, bench-locomo)",
    )
    parser.add_argument(
        "--keep", type=Path, default=None, metavar="DIR", help="keep (or reuse) the store in DIR"
    )
    parser.add_argument(
        "--no-coverage", action="store_true", help="skip the candidate-pool coverage check"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print the tables (or JSON with ``--json``)."""
    if args.questions is not None and args.questions < 1:
        raise InvalidInputError(f"--questions must be a positive integer, got {args.questions}")
    wanted = tuple(part.strip() for part in args.conversations.split(",") if part.strip())
    report = measure_locomo(
        args.data,
        conversations=wanted,
        questions=args.questions,
        coverage=None if args.no_coverage else DEFAULT_RECALL_SETTINGS,
        cache=args.cache,
        keep=args.keep,
        progress=not args.no_progress and not args.json,
    )
    return print_report(report, as_json=args.json, text=format_locomo_report)
