"""Matplotlib figures for the ranking notebooks, built without pyplot so they render headless.

Each helper returns a ``matplotlib.figure.Figure`` that is not registered with pyplot: no
global state, no GUI backend needed (CI runs with ``MPLBACKEND=Agg``), and a notebook shows
it by returning it from a cell. Matplotlib is the ``dev`` extra's: it is imported only when a
figure is drawn, so importing this module works without it, and drawing without it raises
``MissingExtraError`` naming the extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from affect_memory.errors import MissingExtraError
from affect_memory.metrics import RankingMetrics

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "category_lines",
    "delta_bars",
    "metric_bars",
    "rank_scatter",
    "recovery_bars",
    "sweep_line",
]

Metric = Literal["mrr", "recall_at_1", "recall_at_5"]
_LABELS: dict[str, str] = {"mrr": "MRR", "recall_at_1": "recall@1", "recall_at_5": "recall@5"}


def _figure(**options: Any) -> Figure:
    """A new figure not registered with pyplot; matplotlib is imported here, on first draw."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise MissingExtraError(
            "plots need matplotlib, which the 'dev' extra installs: "
            "pip install -c constraints.txt 'affect-memory[dev]'"
        ) from error
    return Figure(**options)


def metric_bars(
    results: Mapping[str, Mapping[str, RankingMetrics]],
    *,
    metric: Metric = "mrr",
    title: str = "",
) -> Figure:
    """Grouped bars: one group per batch (regime), one bar per scorer."""
    scorers = list(results)
    groups = list(next(iter(results.values()))) if results else []
    figure = _figure(figsize=(10, 4.2), layout="constrained")
    axes = figure.subplots()
    width = 0.8 / max(1, len(scorers))
    positions = np.arange(len(groups))
    for offset, name in enumerate(scorers):
        values = [getattr(results[name][group], metric) for group in groups]
        axes.bar(positions + offset * width - 0.4 + width / 2, values, width, label=name)
    axes.set_xticks(positions, groups)
    axes.set_ylabel(_LABELS[metric])
    axes.set_ylim(0, 1)
    axes.set_title(title)
    axes.legend(fontsize="small", ncols=2, loc="upper left")
    axes.grid(axis="y", alpha=0.3)
    return figure


def sweep_line(
    values: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    xlabel: str,
    ylabel: str = "MRR",
    title: str = "",
    log_x: bool = False,
) -> Figure:
    """One line per named series over a swept parameter."""
    figure = _figure(figsize=(6.5, 4), layout="constrained")
    axes = figure.subplots()
    for name, ys in series.items():
        axes.plot(values, ys, marker="o", label=name)
    if log_x:
        axes.set_xscale("symlog", linthresh=0.01)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize="small")
    axes.grid(alpha=0.3)
    return figure


def delta_bars(
    deltas: Mapping[str, float], *, ylabel: str = "MRR change", title: str = ""
) -> Figure:
    """Horizontal bars of signed changes; gains and losses in different colours."""
    labels = list(deltas)
    values = np.array([deltas[label] for label in labels], dtype=np.float64)
    figure = _figure(figsize=(7, 0.45 * len(labels) + 1.2), layout="constrained")
    axes = figure.subplots()
    colours = np.where(values >= 0, "tab:green", "tab:red")
    axes.barh(labels, values, color=colours)
    axes.axvline(0.0, color="black", linewidth=0.8)
    axes.invert_yaxis()
    axes.set_xlabel(ylabel)
    axes.set_title(title)
    axes.grid(axis="x", alpha=0.3)
    return figure


def rank_scatter(
    before: Sequence[int],
    after: Sequence[int],
    groups: Sequence[str],
    *,
    before_label: str,
    after_label: str,
    title: str = "",
) -> Figure:
    """Rank of each query's relevant memory before vs after, coloured by group; below y=x wins."""
    before_array = np.asarray(before, dtype=np.float64)
    after_array = np.asarray(after, dtype=np.float64)
    labels = np.asarray(groups)
    rng = np.random.default_rng(0)  # jitter only, so equal ranks do not hide each other
    figure = _figure(figsize=(5.5, 5), layout="constrained")
    axes = figure.subplots()
    for group in dict.fromkeys(labels.tolist()):
        chosen = labels == group
        jitter = rng.uniform(-0.15, 0.15, (2, int(chosen.sum())))
        axes.scatter(before_array[chosen] + jitter[0], after_array[chosen] + jitter[1],
                     label=group, alpha=0.7, s=22)
    top = float(max(before_array.max(initial=1), after_array.max(initial=1))) + 0.5
    axes.plot([0.5, top], [0.5, top], color="grey", linewidth=0.8)
    axes.set_xlim(0.5, top)
    axes.set_ylim(0.5, top)
    axes.set_xlabel(before_label)
    axes.set_ylabel(after_label)
    axes.set_title(title)
    axes.legend(fontsize="small")
    return figure


def recovery_bars(
    truth: Mapping[str, float], fitted: Mapping[str, float], *, title: str = ""
) -> Figure:
    """Side-by-side panels, one per weight: the true value and the fitted one."""
    names = list(truth)
    figure = _figure(figsize=(3 * len(names), 3), layout="constrained")
    panels = figure.subplots(1, len(names), squeeze=False)[0]
    for axes, name in zip(panels, names, strict=True):
        axes.bar(["true", "fitted"], [truth[name], fitted[name]], color=["tab:grey", "tab:blue"])
        axes.set_title(name, fontsize="small")
    figure.suptitle(title)
    return figure


def category_lines(
    categories: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    xlabel: str,
    ylabel: str = "MRR@10",
    title: str = "",
) -> Figure:
    """One line (with markers) per named series over ordered categories, e.g. age buckets;
    a missing value (None) leaves a gap."""
    figure = _figure(figsize=(7.5, 4.2), layout="constrained")
    axes = figure.subplots()
    positions = np.arange(len(categories))
    for name, values in series.items():
        points = np.array([np.nan if value is None else value for value in values], dtype=float)
        axes.plot(positions, points, marker="o", label=name)
    axes.set_xticks(positions, categories)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(0, 1)
    axes.set_title(title)
    axes.legend(fontsize="small", loc="upper right")
    axes.grid(alpha=0.3)
    return figure
