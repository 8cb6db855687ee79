"""``affect-memory bench locomo``: retrieval quality on LoCoMo through the product's public API.

Every conversation is ingested into a real Chroma store through ``ChromaMemory.add`` (its
lexical index filled by the same writes), and each question is asked of the six systems of
``affect_memory.bench.rankers``, paired on the same embeddings (every text is embedded once, and the
vectors are cached on disk); plain BM25 is the baseline the issue's goal is judged against.

It prints MRR@10, R@1/5/10 and hit@5 per system, overall and per category, MRR@10 by the age
of the evidence, and how many evidence memories the default candidate pool holds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from affect_memory.bench.common import add_json_option, load_average, machine, print_report
from affect_memory.bench.embedding_cache import CachedEmbedder
from affect_memory.bench.locomo_data import LocomoConversation, load_locomo
from affect_memory.bench.locomo_metrics import (
    QuestionScore,
    format_locomo_report,
    question_score,
    summarize,
)
from affect_memory.bench.rankers import STANDARD_SYSTEMS, Ranker
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import SECONDS_PER_DAY
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, RecallSettings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.cache import cache_dir
from affect_memory.models.embeddings import default_embedder

__all__ = ["DEFAULT_DATA", "measure_locomo", "register"]

DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo-dev"
"""Where the dev half lies beside the repository (``../shared/data/locomo-dev``)."""


def _bar(items: Sequence[Any], label: str, progress: bool) -> Any:
    return tqdm(items, desc=label, unit="q", disable=not progress, leave=False)


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
            pool = memory.candidates(
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
