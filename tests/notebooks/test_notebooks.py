"""Every notebook is committed without outputs and executes headless and error-free.

Runtime is reported, not asserted: speed is measured by `make notebooks` (which prints each
notebook's seconds), never by a timed test that would flake on a loaded machine. The notebooks
are sized to run in well under 60 s here; a per-cell timeout only stops a hung kernel.
"""

import sys
from pathlib import Path

import nbformat
import pytest

from plugin.experiments.notebooks import execute_notebook, has_outputs

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_the_three_experiment_notebooks_exist() -> None:
    assert [path.name for path in NOTEBOOKS] == [
        "01_scoring_regimes.ipynb",
        "02_real_embeddings.ipynb",
        "03_fit_weights.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    assert not has_outputs(nbformat.read(path, as_version=4))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes_and_draws_figures(path: Path) -> None:
    executed = execute_notebook(path)
    print(f"{path.name}: {executed.seconds:.1f} s")
    assert executed.figures >= 1, f"{path.name} rendered no figure"


def test_the_notebook_kernel_is_this_interpreter(tmp_path: Path) -> None:
    probe = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    path = tmp_path / "probe.ipynb"
    nbformat.write(probe, path)
    executed = execute_notebook(path)
    printed = executed.notebook.cells[0].outputs[0]["text"].strip()
    assert Path(printed).resolve() == Path(sys.executable).resolve()
