"""Markdown tables of ranking results, for notebook cells and the documentation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from affect_memory.metrics import RankingMetrics

__all__ = ["Detail", "metrics_table"]

Detail = Literal["mrr", "full"]


def _cell(metrics: RankingMetrics | None, detail: Detail) -> str:
    if metrics is None:
        return ""
    if detail == "mrr":
        return f"{metrics.mrr:.3f}"
    return f"{metrics.mrr:.3f} ({metrics.recall_at_1:.3f}/{metrics.recall_at_5:.3f})"


def metrics_table(
    results: Mapping[str, Mapping[str, RankingMetrics]],
    *,
    columns: Sequence[str] | None = None,
    detail: Detail = "full",
    corner: str = "Scorer",
) -> str:
    """One row per scorer, one column per batch: MRR, with (recall@1/recall@5) when ``full``."""
    if columns is None:
        seen: dict[str, None] = {}
        for row in results.values():
            seen.update(dict.fromkeys(row))
        columns = list(seen)
    header = "| " + " | ".join([corner, *columns]) + " |"
    rule = "|" + "|".join(["---"] + ["---:"] * len(columns)) + "|"
    lines = [header, rule]
    for name, row in results.items():
        cells = [_cell(row.get(column), detail) for column in columns]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)
