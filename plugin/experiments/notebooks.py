"""Execute the experiment notebooks headless and write rendered copies; used by CI and make.

``python -m affect_memory.experiments.notebooks notebooks/*.ipynb --out notebooks/rendered`` runs
each notebook in a fresh ``python3`` kernel (the interpreter running this module, so the venv's),
fails on the first cell error, and saves the executed copy with its outputs and figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ExecutedNotebook", "execute_notebook", "has_outputs", "kernel_environment", "main"]

CELL_TIMEOUT_SECONDS = 60


@dataclass(frozen=True, slots=True)
class ExecutedNotebook:
    """A notebook after execution, with how long it took and how many figures it drew."""

    path: Path
    notebook: Any
    seconds: float
    figures: int


def _nbclient() -> tuple[Any, Any]:
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "executing notebooks needs nbclient, nbformat and ipykernel: "
            "pip install -e '.[dev]'"
        ) from error
    return nbformat, NotebookClient


def has_outputs(notebook: Any) -> bool:
    """Whether any code cell carries outputs or an execution count."""
    return any(
        cell.get("outputs") or cell.get("execution_count") is not None
        for cell in notebook.cells
        if cell.cell_type == "code"
    )


def _figures(notebook: Any) -> int:
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", ())
    )


def kernel_environment() -> dict[str, str]:
    """This process's environment plus the settings every notebook kernel runs under.

    Headless figures, no model-hub or telemetry calls, and one torch/BLAS thread: the corpus
    is small, and on a busy 2-core machine extra threads spin instead of helping (measured:
    about 40% less CPU for notebook 02).
    """
    environment = dict(os.environ)
    environment["MPLBACKEND"] = "Agg"
    environment.setdefault("HF_HUB_OFFLINE", "1")
    environment.setdefault("ANONYMIZED_TELEMETRY", "False")
    environment.setdefault("OMP_NUM_THREADS", "1")
    # tqdm.auto warns in every kernel that lacks ipywidgets; it is noise in rendered copies.
    quiet = "ignore:IProgress not found"
    environment["PYTHONWARNINGS"] = ",".join(
        filter(None, [environment.get("PYTHONWARNINGS"), quiet])
    )
    return environment


def execute_notebook(path: Path, *, timeout: int = CELL_TIMEOUT_SECONDS) -> ExecutedNotebook:
    """Run every cell of ``path`` in a fresh kernel, headless; raises on the first cell error."""
    nbformat, notebook_client = _nbclient()
    notebook = nbformat.read(path, as_version=4)
    client = notebook_client(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(path).resolve().parent)}},
    )
    started = time.perf_counter()
    client.execute(env=kernel_environment())
    seconds = time.perf_counter() - started
    return ExecutedNotebook(Path(path), notebook, seconds, _figures(notebook))


def main(argv: list[str] | None = None) -> int:
    """Execute the given notebooks and write each executed copy into ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("notebooks/rendered"))
    args = parser.parse_args(argv)
    nbformat, _ = _nbclient()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.notebooks:
        executed = execute_notebook(path)
        target = args.out / path.name
        nbformat.write(executed.notebook, target)
        print(f"{path}: {executed.seconds:.1f} s, {executed.figures} figures -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
