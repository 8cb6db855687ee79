"""Every notebook is committed without outputs and executes headless and error-free.

Runtime is reported, not asserted: speed is measured by `make notebooks` (which prints each
notebook's seconds), never by a timed test that would flake on a loaded machine. The notebooks
are sized to run in well under 60 s here; a per-cell timeout only stops a hung kernel.
"""

import sys
from pathlib import Path

import nbformat
import pytest

from affect_memory.bench.locomo import DEFAULT_DATA
from affect_memory.experiments.notebooks import execute_notebook, has_outputs

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


NEEDS_LOCOMO = {"04_locomo.ipynb"}
"""Notebooks that read the LoCoMo dev half beside the repository; they skip without it."""


def test_the_four_experiment_notebooks_exist() -> None:
    assert [path.name for path in NOTEBOOKS] == [
        "01_scoring_regimes.ipynb",
        "02_real_embeddings.ipynb",
        "03_fit_weights.ipynb",
        "04_locomo.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    assert not has_outputs(nbformat.read(path, as_version=4))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes_and_draws_figures(path: Path) -> None:
    executed = execute_notebook(path)
    print(f"{path.name}: {executed.seconds:.1f} s")
    if path.name in NEEDS_LOCOMO and not DEFAULT_DATA.is_dir():
        # Outside CI (which has the data, or the notebook raises) it says why and stops.
        assert "Skipped: the LoCoMo dev half is not at" in _printed(executed.notebook)
        return
    assert executed.figures >= 1, f"{path.name} rendered no figure"


def _printed(notebook: object) -> str:
    return "".join(
        output.get("text", "")
        for cell in notebook.cells  # type: ignore[attr-defined]
        if cell.cell_type == "code"
        for output in cell.get("outputs", ())
    )


def test_the_locomo_notebook_skips_cleanly_without_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AFFECT_MEMORY_LOCOMO_DATA", str(tmp_path / "absent"))
    monkeypatch.delenv("CI", raising=False)
    executed = execute_notebook(NOTEBOOKS[-1])
    assert f"Skipped: the LoCoMo dev half is not at {tmp_path / 'absent'}" in _printed(
        executed.notebook
    )
    assert executed.figures == 0
    monkeypatch.setenv("CI", "true")  # in CI the data is required: the notebook fails
    with pytest.raises(Exception, match="CI requires it"):
        execute_notebook(NOTEBOOKS[-1])


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
