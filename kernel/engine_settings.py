"""What an ``AffectEngine`` is configured with besides its collaborators: four value objects.

``EngineLimits`` bounds sizes and counts, ``EngineRetrieval`` says how retrieved memories are
ranked, ``EnginePolicies`` how a turn decides (appraisal, gate failures, intents, a fresh
state), and ``EnginePresentation`` how state is put into words and numbers for the model and
for callers. Each is immutable and refuses a bad value when it is built, naming
``Class.field``, so a mistuned engine fails where it is written rather than inside a turn; each
setting has exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from affect_memory.kernel.affect import DEFAULT_AFFECT_CONTROLS, AffectControls
from affect_memory.kernel.appraisal import (
    BUILTIN_INTENTS,
    CUSTOM_INTENT_PATTERN,
    DefaultAppraisalPolicy,
)
from affect_memory.kernel.bounds import NonNegativeInt, PositiveInt, check_int
from affect_memory.kernel.errors import InvalidInputError, UnknownIntentError, shown
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.parameters import ParameterModel
from affect_memory.kernel.prompt import (
    DEFAULT_EVIDENCE_LIMITS,
    DEFAULT_PROMPT_WORDING,
    EvidenceLimits,
    PromptWording,
)
from affect_memory.kernel.protocols import AppraisalPolicy
from affect_memory.kernel.retrieval import RetrievalWeights
from affect_memory.kernel.surfacing import DEFAULT_PRESENCE_LABELS, PresenceLabels

__all__ = [
    "DEFAULT_APPRAISAL_POLICY",
    "DEFAULT_ENGINE_LIMITS",
    "DEFAULT_ENGINE_POLICIES",
    "DEFAULT_ENGINE_PRESENTATION",
    "DEFAULT_ENGINE_RETRIEVAL",
    "EngineLimits",
    "EnginePolicies",
    "EnginePresentation",
    "EngineRetrieval",
    "GateErrorMode",
    "normalize_intent",
]

GateErrorMode = Literal["raise", "respond", "silent"]
"""What a gate failure does: propagate (default), answer as CASUAL, or stay silent."""


class EngineLimits(ParameterModel):
    """Size and count limits a turn enforces, in characters unless named otherwise."""

    max_message_chars: PositiveInt = 16_000
    max_history_messages: PositiveInt = 200
    """History sent to adapters is the newest messages within both history limits."""
    max_history_chars: PositiveInt = 128_000
    max_system_prompt_chars: PositiveInt = 128_000
    max_output_chars: PositiveInt = 32_000
    max_retrieval_candidates: PositiveInt = 64
    """More candidates than this from a retriever fail the turn."""
    retrieval_limit: NonNegativeInt = 6
    """Ranked memories kept for a turn; 0 skips retrieval."""


DEFAULT_ENGINE_LIMITS = EngineLimits()
"""The limits an engine enforces unless given others."""


@dataclass(frozen=True, slots=True)
class EngineRetrieval:
    """How a turn ranks the memories its retriever returns.

    ``weights`` are the ranking settings, as ``ChromaMemory.recall`` takes them; None ranks
    with the retriever's ``ranking_weights`` when it has them (so a turn ranks as that store's
    recall does), else with the kernel's defaults, and lets a ranked retriever rank with its
    own settings. With ``skip_history_echoes``, retrieved memories whose text is a message in
    the history window are left out: the model already sees them, and their fresh timestamps
    would crowd older facts out.
    """

    weights: RetrievalWeights | None = None
    skip_history_echoes: bool = True

    def __post_init__(self) -> None:
        if self.weights is not None and not isinstance(self.weights, RetrievalWeights):
            raise InvalidInputError(
                f"EngineRetrieval.weights must be RetrievalWeights or None, "
                f"got {shown(self.weights)}"
            )
        if not isinstance(self.skip_history_echoes, bool):
            raise InvalidInputError(
                "EngineRetrieval.skip_history_echoes must be a bool, "
                f"got {shown(self.skip_history_echoes)}"
            )


DEFAULT_ENGINE_RETRIEVAL = EngineRetrieval()
"""The retriever's own weights (else the kernel's), and history echoes left out."""

DEFAULT_APPRAISAL_POLICY = DefaultAppraisalPolicy()
"""The reference appraisal policy with its default parameters."""


def normalize_intent(raw: object, custom_intents: Iterable[str] = ()) -> str:
    """Trim and upper-case an intent; accept the seven built-ins and registered custom labels.

    Custom labels are normalized the same way, so ``{"domain_event"}`` registers DOMAIN_EVENT.
    Anything else raises ``UnknownIntentError`` naming the value.
    """
    return normalized_intent(raw, check_custom_intents(custom_intents))


def normalized_intent(raw: object, custom: frozenset[str]) -> str:
    """``normalize_intent`` against custom labels that are already checked and normalized."""
    if not isinstance(raw, str):
        raise UnknownIntentError(f"intent must be a string, got {shown(raw)}")
    intent = raw.strip().upper()
    if intent in BUILTIN_INTENTS or intent in custom:
        return intent
    known = [*BUILTIN_INTENTS, *sorted(custom)]
    raise UnknownIntentError(f"intent {shown(raw)} is not one of {known}")


def check_custom_intents(labels: Iterable[str]) -> frozenset[str]:
    """Custom labels trimmed and upper-cased like gate intents, then checked."""
    if isinstance(labels, str):
        raise InvalidInputError(
            f"custom_intents must be a collection of labels, got {shown(labels)}"
        )
    checked: set[str] = set()
    for label in labels:
        normalized = label.strip().upper() if isinstance(label, str) else None
        if normalized is None or CUSTOM_INTENT_PATTERN.fullmatch(normalized) is None:
            raise InvalidInputError(
                f"custom intent {shown(label)} must match [A-Z][A-Z0-9_]{{0,63}} "
                "once trimmed and upper-cased"
            )
        if normalized in BUILTIN_INTENTS:
            raise InvalidInputError(
                f"custom intent {shown(label)} is already the built-in intent {normalized}"
            )
        checked.add(normalized)
    return frozenset(checked)


@dataclass(frozen=True, slots=True)
class EnginePolicies:
    """How a turn decides: its appraisal, what a gate failure does, which intents it accepts
    and the state a new conversation starts from.

    ``custom_intents`` are kept trimmed and upper-cased, as a frozenset; a gate may answer
    with them besides the seven built-ins. ``state_factory`` is called for a conversation
    with no stored state, and must return an ``AffectState``.
    """

    appraisal_policy: AppraisalPolicy = DEFAULT_APPRAISAL_POLICY
    gate_error_mode: GateErrorMode = "raise"
    custom_intents: Iterable[str] = frozenset()
    state_factory: Callable[[], AffectState] = AffectState

    def __post_init__(self) -> None:
        if not callable(getattr(self.appraisal_policy, "appraise", None)):
            raise InvalidInputError(
                "EnginePolicies.appraisal_policy must provide appraise, "
                f"got {shown(self.appraisal_policy)}"
            )
        if self.gate_error_mode not in ("raise", "respond", "silent"):
            raise InvalidInputError(
                "EnginePolicies.gate_error_mode must be 'raise', 'respond' or 'silent', "
                f"got {shown(self.gate_error_mode)}"
            )
        object.__setattr__(self, "custom_intents", check_custom_intents(self.custom_intents))
        if not callable(self.state_factory):
            raise InvalidInputError(
                f"EnginePolicies.state_factory must be callable, got {shown(self.state_factory)}"
            )


DEFAULT_ENGINE_POLICIES = EnginePolicies()
"""The reference appraisal, gate failures raised, built-in intents only, a default state."""


@dataclass(frozen=True, slots=True)
class EnginePresentation:
    """How a turn puts state into words and numbers: the system prompt's wording, the evidence
    budget, the response controls, the reply's token budget and the presence labels."""

    prompt_wording: PromptWording = DEFAULT_PROMPT_WORDING
    evidence_limits: EvidenceLimits = DEFAULT_EVIDENCE_LIMITS
    affect_controls: AffectControls = DEFAULT_AFFECT_CONTROLS
    presence_labels: PresenceLabels = DEFAULT_PRESENCE_LABELS
    base_tokens: int = 1024
    """The reply's token budget before the mood's length factor; never raised by it."""

    def __post_init__(self) -> None:
        for name, kind in (
            ("prompt_wording", PromptWording),
            ("evidence_limits", EvidenceLimits),
            ("affect_controls", AffectControls),
            ("presence_labels", PresenceLabels),
        ):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise InvalidInputError(
                    f"EnginePresentation.{name} must be {kind.__name__}, got {shown(value)}"
                )
        try:
            object.__setattr__(self, "base_tokens", check_int(self.base_tokens, 1))
        except ValueError as error:
            raise InvalidInputError(f"EnginePresentation.base_tokens {error}") from None


DEFAULT_ENGINE_PRESENTATION = EnginePresentation()
"""The reference wording, evidence budget, controls and labels, and 1,024 tokens."""
