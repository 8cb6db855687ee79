"""The distribution as a user gets it: one import root, its data inside, working from a wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]

_BUILD_METADATA = (
    "import warnings, sys\n"
    "warnings.simplefilter('always')\n"
    "from setuptools import build_meta\n"
    "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))\n"
)

_SOURCE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "rendered")


def _source_copy(destination: Path) -> Path:
    """What a clean checkout holds of the package: pyproject, README and the two source folders."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, destination / name)
    for folder in ("kernel", "plugin"):
        shutil.copytree(ROOT / folder, destination / folder, ignore=_SOURCE_IGNORE)
    return destination


def _installed_name(package_dir: Path) -> str:
    """The import name a source folder installs as, by pyproject's package-dir mapping."""
    relative = package_dir.relative_to(ROOT)
    for name, folder in sorted(SETUPTOOLS["package-dir"].items(), key=lambda kv: -len(kv[1])):
        if relative == Path(folder) or Path(folder) in relative.parents:
            rest = relative.relative_to(folder).parts
            return ".".join((name, *rest))
    raise AssertionError(f"{relative} is not under any mapped folder")


def test_the_package_list_is_every_source_package_and_nothing_else() -> None:
    # The list is explicit (package-dir renames the folders), so a new sub-package must be added
    # to it or the wheel silently lacks it.
    found = {
        _installed_name(init.parent)
        for folder in ("kernel", "plugin")
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert sorted(SETUPTOOLS["packages"]) == sorted(found)
    assert all(name.split(".")[0] == "affect_memory" for name in SETUPTOOLS["packages"])


def test_the_license_is_an_spdx_string_setuptools_builds_quietly(tmp_path: Path) -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    assert "setuptools>=77" in PYPROJECT["build-system"]["requires"], "SPDX needs setuptools 77"
    source = _source_copy(tmp_path / "source")
    metadata = tmp_path / "metadata"
    metadata.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", _BUILD_METADATA, str(metadata)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    [info] = metadata.glob("*.dist-info")
    assert "License-Expression: MIT" in (info / "METADATA").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel .`` builds from a clean copy of the source."""
    base = tmp_path_factory.mktemp("wheel")
    source = _source_copy(base / "source")
    out = base / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    [built] = out.glob("affect_memory-*.whl")
    return built


def test_the_wheel_has_one_import_root_and_carries_its_runtime_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    roots = {name.split("/")[0] for name in names}
    assert {root for root in roots if not root.endswith(".dist-info")} == {"affect_memory"}
    for data in (
        "affect_memory/gate/intent_exemplars.json",
        "affect_memory/cli/sample_memories.jsonl",
        "affect_memory/memory/recall/lexicon/en.json",
        "affect_memory/py.typed",
        "affect_memory/kernel/py.typed",
    ):
        assert data in names, data
    # the inspector's page, every file of it (serve --inspector reads them from the package)
    static = sorted((ROOT / "plugin" / "http" / "inspector_static").iterdir())
    assert {path.name for path in static} >= {"index.html", "inspector.css", "inspector.js"}
    for path in static:
        assert f"affect_memory/http/inspector_static/{path.name}" in names, path.name


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel; its dependencies are borrowed from the running one.

    The packages the wheel depends on (chromadb, onnxruntime, the model) are seen through a path
    line, so nothing is downloaded and the running venv's editable install of this source tree
    (its own .pth hook) is not loaded: only the wheel can provide ``affect_memory``.
    """
    venv = tmp_path_factory.mktemp("venv") / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    borrowed = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "borrowed-dependencies.pth").write_text(borrowed + "\n", encoding="utf-8")
    yield venv


def _run(venv: Path, cwd: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "AFFECT_MEMORY_HOME": str(cwd / "home"), "PYTHONSAFEPATH": "1"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(venv / "bin" / "affect-memory"), *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{args}: {result.stderr[-2000:]}"
    return result.stdout


@pytest.mark.slow
def test_the_installed_wheel_runs_from_another_directory(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import affect_memory as m, affect_memory.kernel as k; print(m.__file__, k.__file__)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(ROOT) not in where and str(installed) in where
    assert _run(installed, tmp_path, "--version").strip().endswith(PYPROJECT["project"]["version"])
    assert "intent" in _run(installed, tmp_path, "classify", "I love my dog", "--json")
    assert (
        "presence" in _run(installed, tmp_path, "demo", "--data-dir", str(tmp_path / "d")).lower()
    )
    found = _run(
        installed,
        tmp_path,
        "recall",
        "bees",
        "--user-id",
        "alice",
        "--json",
        "--data-dir",
        str(tmp_path / "d" / "demo"),
    )
    assert json.loads(found.splitlines()[0])["results"], found


@pytest.mark.slow
def test_the_installed_mcp_server_answers_initialize(installed: Path, tmp_path: Path) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "wheel-test", "version": "0"},
        },
    }
    out = _run(
        installed,
        tmp_path,
        "mcp",
        "--data-dir",
        str(tmp_path / "data"),
        stdin=json.dumps(request) + "\n",
    )
    reply = json.loads(out.splitlines()[0])
    assert reply["id"] == 1
    assert reply["result"]["serverInfo"]["name"]
