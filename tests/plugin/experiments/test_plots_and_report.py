"""Plot helpers render headless to PNG and need matplotlib only to draw; the markdown table has
the promised shape."""

import io
import subprocess
import sys

import pytest
from matplotlib.figure import Figure

from affect_memory.errors import MissingExtraError
from affect_memory.experiments import plots
from affect_memory.experiments.report import metrics_table
from affect_memory.metrics import RankingMetrics

RESULTS = {
    "similarity only": {"A": RankingMetrics(0.25, 0.75, 0.46, 400),
                        "B": RankingMetrics(0.2, 0.7, 0.44, 400)},
    "kernel default": {"A": RankingMetrics(0.1, 0.5, 0.28, 400)},
}


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


@pytest.mark.parametrize(
    "figure",
    [
        lambda: plots.metric_bars({"s": RESULTS["similarity only"]}, title="t"),
        lambda: plots.sweep_line([0, 0.1, 1], {"D": [0.1, 0.2, 0.3]}, xlabel="w", log_x=True),
        lambda: plots.delta_bars({"a": 0.1, "b": -0.2}),
        lambda: plots.rank_scatter([1, 3], [2, 1], ["x", "y"], before_label="b",
                                   after_label="a"),
        lambda: plots.recovery_bars({"w": 1.0}, {"w": 0.9}),
        lambda: plots.category_lines(["0-7 d", "7-30 d"], {"s": [0.4, None]}, xlabel="age"),
    ],
)
def test_every_plot_renders_to_png(figure: object) -> None:
    rendered = figure()  # type: ignore[operator]
    assert isinstance(rendered, Figure)
    assert _png(rendered).startswith(b"\x89PNG")


def test_metrics_table_has_a_row_per_scorer_and_blank_missing_cells() -> None:
    table = metrics_table(RESULTS).splitlines()
    assert table[0] == "| Scorer | A | B |"
    assert table[2] == "| similarity only | 0.460 (0.250/0.750) | 0.440 (0.200/0.700) |"
    assert table[3] == "| kernel default | 0.280 (0.100/0.500) |  |"
    assert metrics_table(RESULTS, detail="mrr").splitlines()[3] == "| kernel default | 0.280 |  |"


def test_importing_the_plots_does_not_import_matplotlib() -> None:
    code = "import sys, affect_memory.experiments.plots; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_drawing_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # what a missing package does
    with pytest.raises(MissingExtraError, match=r"matplotlib, which the 'dev' extra installs"):
        plots.delta_bars({"a": 0.1})
