"""LoCoMo's scores of ranked memory ids against a question's evidence, and their tables.

Per question (``affect_memory.metrics``): MRR@10 (one over the rank of the first evidence
memory within the top 10, else 0), R@k (the share of the question's evidence memories in the
top k) and hit@5 (any evidence in the top 5). A system's figure is the mean over questions,
overall and per category.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from affect_memory.bench.locomo_data import CATEGORIES
from affect_memory.formatting import format_table
from affect_memory.metrics import hit_at_k, reciprocal_rank, share_at_k

__all__ = [
    "AGE_BUCKETS",
    "METRICS",
    "QuestionScore",
    "age_bucket",
    "format_locomo_report",
    "question_score",
    "summarize",
]

METRICS = ("mrr_at_10", "r_at_1", "r_at_5", "r_at_10", "hit_at_5")
"""Each question's metrics, in table order."""

AGE_BUCKETS = ((0.0, 7.0), (7.0, 30.0), (30.0, 90.0), (90.0, 180.0), (180.0, float("inf")))
"""Buckets of the age (days at ``now``) of a question's newest evidence memory."""


def age_bucket(days: float) -> str:
    """The name of the age bucket ``days`` falls in, e.g. ``"7-30 d"``."""
    for low, high in AGE_BUCKETS:
        if low <= days < high:
            return f">= {low:g} d" if high == float("inf") else f"{low:g}-{high:g} d"
    return f">= {AGE_BUCKETS[-1][0]:g} d"


@dataclass(frozen=True, slots=True)
class QuestionScore:
    """One question's metrics under one system."""

    category: int
    evidence_age_days: float
    mrr_at_10: float
    r_at_1: float
    r_at_5: float
    r_at_10: float
    hit_at_5: float


def question_score(
    ranked: Sequence[str], evidence: Sequence[str], *, category: int, evidence_age_days: float
) -> QuestionScore:
    """The metrics of one ranking (best first) against the question's evidence ids."""
    wanted = set(evidence)
    return QuestionScore(
        category=category,
        evidence_age_days=evidence_age_days,
        mrr_at_10=reciprocal_rank(ranked, wanted, cutoff=10),
        r_at_1=share_at_k(ranked, wanted, 1),
        r_at_5=share_at_k(ranked, wanted, 5),
        r_at_10=share_at_k(ranked, wanted, 10),
        hit_at_5=hit_at_k(ranked, wanted, 5),
    )


def _mean(scores: Sequence[QuestionScore]) -> dict[str, float]:
    if not scores:
        return {"n": 0, **dict.fromkeys(METRICS, 0.0)}
    means = {name: sum(getattr(s, name) for s in scores) / len(scores) for name in METRICS}
    return {"n": len(scores), **{name: round(value, 4) for name, value in means.items()}}


def summarize(scores: Sequence[QuestionScore]) -> dict[str, Any]:
    """Means overall, per category and MRR@10 per evidence-age bucket."""
    by_age: dict[str, list[QuestionScore]] = {}
    for score in scores:
        by_age.setdefault(age_bucket(score.evidence_age_days), []).append(score)
    ordered_buckets = [age_bucket(low) for low, _ in AGE_BUCKETS]
    return {
        "overall": _mean(scores),
        "categories": {
            str(number): _mean([s for s in scores if s.category == number])
            for number in CATEGORIES
        },
        "by_evidence_age": {
            bucket: {"n": len(by_age[bucket]), "mrr_at_10": _mean(by_age[bucket])["mrr_at_10"]}
            for bucket in ordered_buckets
            if bucket in by_age
        },
    }


def format_locomo_report(report: Mapping[str, Any]) -> str:
    """The report as readable tables: systems overall, per category, by evidence age."""
    systems: Mapping[str, Any] = report["systems"]
    lines = [
        f"LoCoMo: {report['questions']} questions over conversations "
        f"{', '.join(report['conversations'])} ({report['memories']} memories), "
        f"embeddings by {report['embedder']}",
        "",
    ]
    headers = ["system", "n", "MRR@10", "R@1", "R@5", "R@10", "hit@5"]
    lines.append(
        format_table(
            headers,
            [
                [name, s["overall"]["n"], *(s["overall"][m] for m in METRICS)]
                for name, s in systems.items()
            ],
        )
    )
    lines.append("")
    category_headers = ["system"] + [
        f"c{n} {label} MRR / R@10" for n, label in CATEGORIES.items()
    ]
    lines.append(
        format_table(
            category_headers,
            [
                [name]
                + [
                    f"{s['categories'][str(n)]['mrr_at_10']:.3f} / "
                    f"{s['categories'][str(n)]['r_at_10']:.3f}"
                    for n in CATEGORIES
                ]
                for name, s in systems.items()
            ],
        )
    )
    buckets = [age_bucket(low) for low, _ in AGE_BUCKETS]
    lines += ["", "MRR@10 by the age of the newest evidence memory:"]
    lines.append(
        format_table(
            ["system", *buckets],
            [
                [name]
                + [
                    f"{s['by_evidence_age'][b]['mrr_at_10']:.3f}" if b in s["by_evidence_age"]
                    else "-"
                    for b in buckets
                ]
                for name, s in systems.items()
            ],
        )
    )
    pool = report.get("pool")
    if pool:
        lines += [
            "",
            f"default pool: {pool['in_pool']:,} of {pool['evidence']:,} evidence memories "
            f"({pool['coverage']:.1%}), {pool['mean_size']:.0f} memories per question on "
            "average",
        ]
    lines.append(f"seconds per system: {report['seconds']}")
    return "\n".join(lines)
