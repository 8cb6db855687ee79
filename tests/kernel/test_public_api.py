"""The kernel's public surface changes only on purpose, is documented, and stays pure."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from affect_memory import kernel

PUBLIC = [
    "AffectControls",
    "AffectDynamics",
    "AffectEngine",
    "AffectMemoryError",
    "AffectState",
    "AppraisalOutcome",
    "AppraisalPolicy",
    "AttachmentState",
    "BUILTIN_INTENTS",
    "BatchScores",
    "CUSTOM_INTENT_PATTERN",
    "CandidateColumns",
    "CognitionState",
    "CorruptStateError",
    "DEFAULT_AFFECT_CONTROLS",
    "DEFAULT_AFFECT_DYNAMICS",
    "DEFAULT_EVIDENCE_LIMITS",
    "DEFAULT_EXPECTATION_CUES",
    "DEFAULT_PRESENCE_LABELS",
    "DEFAULT_PROMPT_WORDING",
    "DEFAULT_RETRIEVAL_WEIGHTS",
    "DEFAULT_STAGE_LADDER",
    "DecodingParams",
    "DefaultAppraisalPolicy",
    "DelegatingRetriever",
    "EmotionMap",
    "EmotionSignal",
    "EngineError",
    "EngineLimits",
    "EnginePolicies",
    "EnginePresentation",
    "EngineRetrieval",
    "EvidenceLimits",
    "ExpectationCues",
    "FixtureError",
    "GateInput",
    "GateResult",
    "GenerateInput",
    "Goals",
    "ImpulseResult",
    "InMemoryStateStore",
    "IntentGate",
    "IntentImpulse",
    "InvalidInputError",
    "LimitExceededError",
    "MalformedOutputError",
    "MemoryCandidate",
    "MemoryRetriever",
    "Message",
    "ModelAdapter",
    "Mood",
    "OutboxItem",
    "Personality",
    "PresenceLabels",
    "PromptWording",
    "RankedColumns",
    "RelationshipState",
    "RetrievalInput",
    "RetrievalWeights",
    "ScoredCandidate",
    "ScriptedModel",
    "ScriptedReply",
    "StageLadder",
    "StateStore",
    "StateStoreError",
    "StateTransaction",
    "StaticRetriever",
    "TurnEffects",
    "TurnRecord",
    "TurnResult",
    "UnknownIntentError",
    "UnknownStageError",
    "UntrustedContext",
    "apply_length_factor",
    "appraise_input",
    "appraise_turn",
    "baseline_weight",
    "build_presence_vector",
    "build_system_prompt",
    "build_untrusted_context",
    "candidate_columns",
    "candidate_score",
    "clean_text",
    "decay_mood",
    "decay_occ_carry",
    "decoding_params",
    "expectation_emotions",
    "is_ambivalent",
    "length_factor",
    "mood_congruence_factor",
    "mood_inertia",
    "mood_octant",
    "normalize_intent",
    "presence_line",
    "rank_batch",
    "rank_candidates",
    "rank_columns",
    "recency_weight",
    "score_batch",
    "score_candidate",
    "stage_int",
    "state_emotions",
]
"""The pinned public API, sorted; change it here and in kernel/__init__.py together."""

FIXTURE_FUNCTIONS = [
    "apply_length_factor",
    "appraise_input",
    "appraise_turn",
    "baseline_weight",
    "build_presence_vector",
    "candidate_score",
    "clean_text",
    "decay_mood",
    "decay_occ_carry",
    "decoding_params",
    "expectation_emotions",
    "is_ambivalent",
    "length_factor",
    "mood_congruence_factor",
    "mood_inertia",
    "mood_octant",
    "presence_line",
    "rank_candidates",
    "recency_weight",
    "score_candidate",
    "stage_int",
    "state_emotions",
]
"""The functions issue 2 requires, named as the fixture keys name them."""


def test_public_api_is_pinned() -> None:
    assert sorted(PUBLIC) == PUBLIC
    assert sorted(kernel.__all__) == PUBLIC
    assert len(set(kernel.__all__)) == len(kernel.__all__)


def test_every_fixture_function_is_public() -> None:
    assert set(FIXTURE_FUNCTIONS) <= set(kernel.__all__)


def _attribute_docstring(module_name: str, name: str) -> str | None:
    """The string literal right after ``name = ...`` at module level, if any."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
    body = tree.body
    for index, node in enumerate(body[:-1]):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AnnAssign) else [])
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            following = body[index + 1]
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                return str(following.value.value)
    return None


def _defining_module(name: str) -> str:
    for module_name in sorted(sys.modules):
        if module_name.startswith("affect_memory.kernel.") and name in vars(
            sys.modules[module_name]
        ):
            module = sys.modules[module_name]
            source = Path(inspect.getfile(module)).read_text(encoding="utf-8")
            if f"\n{name} =" in source or f"\n{name}:" in source:
                return module_name
    raise AssertionError(f"no kernel module assigns {name}")


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    value = getattr(kernel, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        # A class's own docstring, not one inherited from its base.
        doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
        assert doc and doc.strip(), f"{name} has no docstring of its own"
        assert value.__module__.startswith("affect_memory.kernel")
    else:
        documented_type = (
            type(value).__module__.startswith("affect_memory.kernel") and type(value).__doc__
        )
        assert documented_type or _attribute_docstring(_defining_module(name), name), (
            f"{name} is neither a documented kernel value nor followed by a docstring"
        )


def test_importing_kernel_pulls_in_no_storage_model_or_plugin_code() -> None:
    probe = (
        "import json, sys; import affect_memory.kernel; "
        "print(json.dumps(sorted(m for m in sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(result.stdout))
    for forbidden in ("chromadb", "sentence_transformers", "sqlite3", "torch"):
        assert forbidden not in loaded
        assert not any(name.startswith(forbidden + ".") for name in loaded)
    # The package root is imported on the way in; it is lazy and loads none of the plugin.
    ours = {name for name in loaded if name.split(".")[0] == "affect_memory"}
    plugin_code = {name for name in ours if not name.startswith("affect_memory.kernel")}
    assert plugin_code == {"affect_memory"}


def test_kernel_version_is_the_package_version_in_pyproject() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text("utf-8"))
    assert kernel.__version__ == pyproject["project"]["version"]


def test_kernel_version_falls_back_when_the_package_is_not_installed() -> None:
    # Importing the kernel from a bare source tree (no distribution metadata) must still work.
    probe = (
        "import importlib.metadata as m\n"
        "def missing(name): raise m.PackageNotFoundError(name)\n"
        "m.version = missing\n"
        "from affect_memory import kernel; print(kernel.__version__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "0+unknown"


def _function_level_imports(path: Path) -> list[str]:
    """``module:line`` of every import of a kernel module made inside a function or class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith(
                "affect_memory.kernel"
            ):
                found.append(f"{path.name}:{inner.lineno}")
            if isinstance(inner, ast.Import) and any(
                alias.name.startswith("affect_memory.kernel") for alias in inner.names
            ):
                found.append(f"{path.name}:{inner.lineno}")
    return found


def test_no_kernel_module_imports_another_lazily() -> None:
    # A lazy import hides a cycle; the kernel's modules form a clean top-level order instead.
    root = Path(kernel.__file__).parent
    lazy = [hit for path in sorted(root.rglob("*.py")) for hit in _function_level_imports(path)]
    assert lazy == []


def test_all_exports_exactly_what_the_package_defines() -> None:
    # As httpx checks its own: every public name of the namespace is in __all__, and only they.
    defined = {
        name
        for name, value in vars(kernel).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(kernel.__all__) == defined
    assert isinstance(kernel.__version__, str)  # public too, but like httpx's, not in __all__
