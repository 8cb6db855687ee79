"""The plugin's public surface: curated, exactly what ``__all__`` lists, light to import, and
everything the README imports comes from ``plugin`` or ``kernel`` themselves."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import affect_memory as plugin
from affect_memory import kernel

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = [
    "AdoptedCollection",
    "AffectMemoryLlamaRetriever",
    "AffectMemoryRetriever",
    "AffectRankingPostprocessor",
    "ChatConfigError",
    "ChromaMemory",
    "DEFAULT_GATE_PARAMS",
    "DEFAULT_HNSW",
    "DEFAULT_RECALL_SETTINGS",
    "DEFAULT_RETRIEVAL_RULE",
    "DENSE_RECALL",
    "DefaultMemoryWritePolicy",
    "Embedder",
    "EmbeddingError",
    "EmbeddingIntentGate",
    "EvaluationReport",
    "ExemplarError",
    "FieldMapping",
    "GateParams",
    "GateUnavailableError",
    "HnswParams",
    "IntentExemplars",
    "IntentPrediction",
    "IsolationError",
    "LegacyLayoutError",
    "LockTimeoutError",
    "MalformedGateReplyError",
    "MalformedResponseError",
    "MalformedStreamError",
    "MemoryRecord",
    "MemoryStats",
    "MemoryTurnEffects",
    "MemoryWritePolicy",
    "MigrationError",
    "MigrationReport",
    "MissingExtraError",
    "ModelAdapterError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelStreamError",
    "ModelTimeoutError",
    "OnnxEmbedder",
    "OpenAICompatibleModel",
    "PostgresStateStore",
    "QuarantinedOutboxItem",
    "QueryFileError",
    "RECALL_WEIGHTS",
    "RecallHit",
    "RecallQuery",
    "RecallResult",
    "RecallSettings",
    "RecordError",
    "Relevance",
    "ReplayReport",
    "RetrievalRule",
    "SQLiteStateStore",
    "SentenceTransformerEmbedder",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TimestampError",
    "TurnWriteReport",
    "UserRetriever",
    "WriteReport",
    "WrongSpaceError",
    "__version__",
    "default_embedder",
    "load_exemplars",
    "load_recall_settings",
    "migrate_store",
    "open_state_store",
    "write_recall_settings",
]
"""The pinned public API, sorted; change it here and in plugin/__init__.py together."""


def test_the_public_api_is_pinned() -> None:
    assert sorted(PUBLIC) == PUBLIC
    assert sorted(plugin.__all__) == PUBLIC


def test_all_exports_exactly_what_the_package_defines() -> None:
    # As httpx checks its own: once loaded, every public name of the namespace is in __all__,
    # and only they. Every name loads on first use, so load them all first.
    for name in plugin.__all__:
        getattr(plugin, name)
    defined = {
        name
        for name, value in vars(plugin).items()
        if (not name.startswith("_") or name == "__version__") and not inspect.ismodule(value)
    }
    assert defined == set(plugin.__all__)
    assert set(plugin.__all__) <= set(dir(plugin))


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    value = getattr(plugin, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
        assert doc and doc.strip(), f"{name} has no docstring of its own"
        assert value.__module__.startswith("affect_memory.")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'ChromaMemroy'"):
        plugin.ChromaMemroy  # noqa: B018


def _modules_after(code: str) -> set[str]:
    probe = f"import json, sys; {code}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: set[str] = set(json.loads(result.stdout))
    return loaded


def test_importing_plugin_loads_nothing_heavy() -> None:
    # Every name is lazy: not even numpy, pydantic or the kernel until something is used.
    loaded = _modules_after("import affect_memory")
    heavy_modules = (
        "numpy",
        "pydantic",
        "affect_memory.kernel",
        "chromadb",
        "onnxruntime",
        "httpx",
    )
    for heavy in (*heavy_modules, "torch"):
        assert heavy not in loaded, heavy


def test_using_plugin_loads_no_optional_extra_and_no_model() -> None:
    loaded = _modules_after(
        "import affect_memory as m; m.ChromaMemory; m.default_embedder()"
    )
    for extra in ("torch", "sentence_transformers", "mcp", "psycopg", "psycopg_pool"):
        assert extra not in loaded, extra
    assert "onnxruntime" not in loaded, "the model loads only when something embeds"
    assert not any(name.startswith("langchain") for name in loaded)
    assert not any(name.startswith("llama_index") for name in loaded)


def _readme_imports() -> list[tuple[str, list[str]]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```python\n(.*?)```", readme, re.S):
        for module, names in re.findall(r"^from ([\w.]+) import ([^\n]+)$", block, re.M):
            if module.split(".")[0] == "affect_memory":
                found.append((module, [name.strip() for name in names.split(",")]))
    return found


def test_everything_the_readme_imports_comes_from_plugin_or_kernel_directly() -> None:
    imports = _readme_imports()
    assert imports, "the README imports nothing from plugin or kernel?"
    for module, names in imports:
        assert module in ("affect_memory", "affect_memory.kernel"), f"README imports {module}"
        package = plugin if module == "affect_memory" else kernel
        for name in names:
            assert name in package.__all__, f"README imports {name} from {module}"
