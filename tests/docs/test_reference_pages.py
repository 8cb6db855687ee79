"""The reference pages say what the code does: every command's help, every settings field with
its default, every environment variable the package reads, every HTTP operation."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import affect_memory as plugin
import affect_memory.kernel as kernel
from tests.docs.cli_help import commands, comparable, help_text
from tests.docs.pages import DOCS, ROOT

REFERENCE = DOCS / "reference"


def _sections(page: Path, heading: str) -> dict[str, str]:
    """The text under each heading of ``page`` that matches ``heading``, by its title."""
    text = page.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    matches = list(re.finditer(rf"^{heading}$", text, re.M))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        found[match["title"]] = text[match.end() : end]
    return found


# -- the command line ---------------------------------------------------------------------------


def _cli_blocks() -> dict[str, str]:
    blocks = {}
    sections = _sections(REFERENCE / "cli.md", r"#{2,3} (?P<title>affect-memory.*)")
    for title, body in sections.items():
        fenced = re.search(r"```text\n(.*?)```", body, re.S)
        assert fenced, f"cli.md: '{title}' has no help block"
        blocks[title] = fenced.group(1)
    return blocks


def test_the_cli_reference_has_every_command_and_no_other() -> None:
    shown = set(_cli_blocks())
    live = {prog for prog, _ in commands()}
    assert shown == live, (
        f"missing: {sorted(live - shown)}, gone: {sorted(shown - live)}; "
        "regenerate with python -m tests.docs.cli_help"
    )


@pytest.mark.parametrize("prog", [prog for prog, _ in commands()])
def test_each_command_shows_its_own_help(prog: str) -> None:
    parser = dict(commands())[prog]
    shown = _cli_blocks().get(prog)
    assert shown is not None, f"cli.md has no section for {prog}"
    assert comparable(shown) == comparable(help_text(parser)), (
        f"cli.md shows an old help of {prog}: regenerate with python -m tests.docs.cli_help"
    )


# -- the settings tree --------------------------------------------------------------------------

ROOTS: tuple[type, ...] = (
    plugin.RecallSettings,
    plugin.HnswParams,
    kernel.EngineLimits,
    kernel.EngineRetrieval,
    kernel.EnginePolicies,
    kernel.EnginePresentation,
    plugin.GateParams,
    plugin.RetrievalRule,
)
"""The settings a caller passes; the classes their defaults hold are found from these."""


def _fields(cls: type) -> dict[str, Any]:
    if issubclass(cls, BaseModel):
        return {name: field.default for name, field in cls.model_fields.items()}
    assert dataclasses.is_dataclass(cls), f"{cls.__name__} is neither a model nor a dataclass"
    return {field.name: field.default for field in dataclasses.fields(cls)}


def _settings_classes() -> list[type]:
    """The roots and every settings object their defaults hold, depth first."""
    found: list[type] = []

    def walk(cls: type) -> None:
        if cls in found:
            return
        found.append(cls)
        for value in _fields(cls).values():
            if isinstance(value, BaseModel) or dataclasses.is_dataclass(value):
                walk(type(value))

    for cls in ROOTS:
        walk(cls)
    return found


def _rows(cls: type) -> dict[str, str]:
    """The settings page's rows for ``cls``: each field's default cell."""
    sections = _sections(REFERENCE / "settings.md", r"### `(?P<title>\w+)`")
    assert cls.__name__ in sections, f"settings.md has no section for {cls.__name__}"
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| .* \|$", sections[cls.__name__], re.M)
    return dict(rows)


@pytest.mark.parametrize("cls", _settings_classes(), ids=lambda cls: cls.__name__)
def test_every_settings_field_is_on_the_settings_page_with_its_default(cls: type) -> None:
    rows = _rows(cls)
    fields = _fields(cls)
    assert set(rows) == set(fields), f"{cls.__name__}: page {sorted(rows)}, code {sorted(fields)}"
    for name, default in fields.items():
        if default is None or isinstance(default, bool | int | float | str):
            assert rows[name] == f"`{default!r}`", f"{cls.__name__}.{name} defaults to {default!r}"


def test_the_settings_tree_reaches_the_kernels_parameters() -> None:
    names = {cls.__name__ for cls in _settings_classes()}
    assert {"RetrievalWeights", "AffectDynamics", "AffectControls", "PromptWording"} <= names


def test_every_environment_variable_the_package_reads_is_on_the_settings_page() -> None:
    page = (REFERENCE / "settings.md").read_text(encoding="utf-8")
    read = {
        name
        for folder in ("plugin", "kernel")
        for path in (ROOT / folder).rglob("*.py")
        for name in re.findall(r"[\"'](AFFECT_[A-Z_]+)[\"']", path.read_text(encoding="utf-8"))
    }
    assert "AFFECT_MEMORY_HOME" in read
    missing = sorted(name for name in read if f"`{name}`" not in page)
    assert not missing, f"settings.md does not name {missing}"


# -- the HTTP API -------------------------------------------------------------------------------

OPENAPI = REFERENCE / "openapi.json"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def test_the_http_reference_lists_every_operation_of_the_openapi_document() -> None:
    if not OPENAPI.exists():
        pytest.skip("docs/reference/openapi.json is not written yet (the HTTP API's work)")
    spec = json.loads(OPENAPI.read_text(encoding="utf-8"))
    operations = {
        (method.upper(), path): (operation.get("summary") or "").strip()
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }
    page = (REFERENCE / "http-api.md").read_text(encoding="utf-8")
    rows = {
        (method, path): summary.strip()
        for method, path, summary in re.findall(r"^\| (\w+) \| `([^`]+)` \| (.*) \|$", page, re.M)
    }
    missing, gone = sorted(set(operations) - set(rows)), sorted(set(rows) - set(operations))
    assert not missing and not gone, f"http-api.md lacks {missing} and lists {gone}"
    for key, summary in operations.items():
        assert rows[key] == summary.replace("|", "\\|"), f"{key}: the summary is {summary!r}"
