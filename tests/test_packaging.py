"""pyproject.toml as setuptools reads it: the metadata builds without deprecation warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_BUILD_METADATA = (
    "import warnings, sys\n"
    "warnings.simplefilter('always')\n"
    "from setuptools import build_meta\n"
    "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))\n"
)


def test_the_license_is_an_spdx_string_setuptools_builds_quietly(tmp_path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "MIT"
    assert "setuptools>=77" in project["build-system"]["requires"], "SPDX needs setuptools 77"
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("kernel", "plugin"):
        (source / package).mkdir()
        (source / package / "__init__.py").write_text("")
        (source / package / "py.typed").write_text("")
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
