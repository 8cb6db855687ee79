"""``affect-memory bench longmemeval``: retrieval quality on LongMemEval through the public API.

Each question's haystack is ingested as one user (``affect_memory.bench.longmemeval_data``) into a
real Chroma store through ``ChromaMemory.add``, and the question is asked of the six systems
of ``affect_memory.bench.rankers``, paired on the same embeddings (cached on disk by text). Per
question, at turn level: MRR@10 of the first evidence turn, R@5 and R@10 (the share of
evidence turns in the top k); at session level: whether an answer session is among the
sessions of the top 5 and top 10 turns (``affect_memory.metrics`` computes each). Figures are
means, overall and per question type.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from affect_memory.bench.common import add_json_option, load_average, machine, print_report
from affect_memory.bench.embedding_cache import CachedEmbedder
from affect_memory.bench.longmemeval_data import DEFAULT_DATA, load_longmemeval
from affect_memory.bench.rankers import STANDARD_SYSTEMS, Ranker
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.store import ChromaMemory
from affect_memory.metrics import hit_at_k, reciprocal_rank, share_at_k
from affect_memory.models.cache import cache_dir
from affect_memory.models.embeddings import default_embedder

__all__ = [
    "METRICS",
    "QuestionScore",
    "format_report",
    "measure_longmemeval",
    "question_score",
    "register",
]

METRICS = ("mrr_at_10", "r_at_5", "r_at_10", "session_hit_at_5", "session_hit_at_10")
"""Each question's metrics, in table order."""


@dataclass(frozen=True, slots=True)
class QuestionScore:
    """One question's metrics under one system."""

    category: str
    mrr_at_10: float
    r_at_5: float
    r_at_10: float
    session_hit_at_5: float
    session_hit_at_10: float


def _session(memory_id: str) -> str:
    """The session a memory id names (``<session>[~n]:<turn>``)."""
    return memory_id.rsplit(":", 1)[0].split("~", 1)[0]


def question_score(
    ranked: Sequence[str], evidence: Sequence[str], sessions: Sequence[str], category: str
) -> QuestionScore:
    """The metrics of one ranking (best first) against the evidence turns and sessions."""
    wanted = set(evidence)
    answer = set(sessions)
    by_session = [_session(ident) for ident in ranked[:10]]
    return QuestionScore(
        category,
        reciprocal_rank(ranked, wanted, cutoff=10),
        share_at_k(ranked, wanted, 5),
        share_at_k(ranked, wanted, 10),
        hit_at_k(by_session, answer, 5),
        hit_at_k(by_session, answer, 10),
    )


def _mean(scores: Sequence[QuestionScore]) -> dict[str, float]:
    if not scores:
        return {"n": 0, **dict.fromkeys(METRICS, 0.0)}
    means = {name: sum(getattr(s, name) for s in scores) / len(scores) for name in METRICS}
    return {"n": len(scores), **{name: round(value, 4) for name, value in means.items()}}


def _summary(scores: Sequence[QuestionScore]) -> dict[str, Any]:
    categories = sorted({score.category for score in scores})
    return {
        "overall": _mean(scores),
        "types": {name: _mean([s for s in scores if s.category == name]) for name in categories},
    }


def measure_longmemeval(
    data: Path,
    *,
    types: Sequence[str] = (),
    limit: int | None = None,
    systems: Mapping[str, Ranker] = STANDARD_SYSTEMS,
    cache: Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Ingest each question's haystack, rank the question with every system, and report."""
    load_before = load_average()
    users = load_longmemeval(data, types=types, limit=limit)
    embedder = CachedEmbedder(default_embedder(), cache or cache_dir() / "bench-longmemeval")
    scores: dict[str, list[QuestionScore]] = {name: [] for name in systems}
    seconds = dict.fromkeys(systems, 0.0)
    with (
        tempfile.TemporaryDirectory(prefix="affect-memory-longmemeval-") as scratch,
        ChromaMemory(Path(scratch) / "chroma", embedder=embedder, progress=False) as memory,
    ):
        for user in tqdm(users, desc="questions", unit="q", disable=not progress):
            memory.add(list(user.records), progress=False)
            (question,) = user.questions
            for name, ranker in systems.items():
                start = time.perf_counter()
                (ranked,) = ranker(memory, user, False)
                seconds[name] += time.perf_counter() - start
                scores[name].append(
                    question_score(
                        ranked, question.evidence, question.answer_sessions, question.category
                    )
                )
        embedder.save()
    return {
        "benchmark": "longmemeval",
        "data": str(data),
        "questions": len(users),
        "memories": sum(len(user.records) for user in users),
        "embedder": embedder.name,
        "systems": {name: _summary(found) for name, found in scores.items()},
        "seconds": {name: round(value, 1) for name, value in seconds.items()},
        "machine": machine(load_before),
    }


def format_report(report: Mapping[str, Any]) -> str:
    """The report as readable tables: systems overall, then MRR@10 / R@10 per question type."""
    from affect_memory.formatting import format_table
    systems: Mapping[str, Any] = report["systems"]
    lines = [
        f"LongMemEval: {report['questions']} questions ({report['memories']} memories), "
        f"embeddings by {report['embedder']}",
        "",
        format_table(
            ["system", "n", "MRR@10", "R@5", "R@10", "session@5", "session@10"],
            [
                [name, s["overall"]["n"], *(f"{s['overall'][m]:.3f}" for m in METRICS)]
                for name, s in systems.items()
            ],
        ),
        "",
    ]
    types = sorted({kind for s in systems.values() for kind in s["types"]})
    lines.append(
        format_table(
            ["system", *(f"{kind} MRR / R@10" for kind in types)],
            [
                [name]
                + [
                    f"{s['types'][kind]['mrr_at_10']:.3f} / {s['types'][kind]['r_at_10']:.3f}"
                    if kind in s["types"]
                    else "-"
                    for kind in types
                ]
                for name, s in systems.items()
            ],
        )
    )
    return "\n".join(lines)


def register(benchmarks: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench longmemeval``."""
    parser = benchmarks.add_parser(
        "longmemeval",
        help="retrieval quality on LongMemEval: cosine, BM25, RRF, the dense and default recall",
        description=(
            "Ingest each LongMemEval question's haystack (one user per question, every turn a "
            "memory) into a fresh Chroma store and ask the question of plain cosine search, "
            "plain BM25, their reciprocal-rank fusion, the dense recall of before and the "
            "default recall, on the same embeddings; print turn-level MRR@10, R@5 and R@10 and "
            "session-level hits, overall and per question type."
        ),
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        metavar="FILE",
        help=f"a LongMemEval file, .json or .json.gz (default {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--types", default="", metavar="TYPES", help="only these question types, comma-separated"
    )
    parser.add_argument(
        "--limit", type=int, default=None, metavar="N", help="only the first N questions"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the embeddings are cached (default: the user cache, bench-longmemeval)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, then print the tables (or JSON with ``--json``)."""
    if args.limit is not None and args.limit < 1:
        raise InvalidInputError(f"--limit must be a positive integer, got {args.limit}")
    types = tuple(part.strip() for part in args.types.split(",") if part.strip())
    report = measure_longmemeval(
        args.data,
        types=types,
        limit=args.limit,
        cache=args.cache,
        progress=not args.no_progress and not args.json,
    )
    return print_report(report, as_json=args.json, text=format_report)
