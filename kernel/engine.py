"""The turn engine: one user message in, one validated, atomically committed turn out.

A responding turn runs gate → optional retrieval → ranking → appraisal policy → response
controls → generation → one commit. Every adapter output is checked for type, count and
size, every limit is enforced before anything crosses an adapter boundary, and any failure
before the commit leaves state and transcript exactly as they were. A model that streams no
text gives an appraisal-only turn: the new state and the user message are committed, and no
empty assistant message is written (the MCP ``appraise`` tool runs such turns).

What an engine is configured with lives in ``engine_settings`` (limits, retrieval, policies,
presentation); this module checks the collaborators and runs the turn. It is about 730 lines
because a turn is one ordered pipeline, and each adapter boundary's guard belongs beside the
step that crosses it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from time import perf_counter
from typing import Any, Never

from affect_memory.kernel.affect import apply_length_factor
from affect_memory.kernel.affect import decoding_params as _decoding_params
from affect_memory.kernel.appraisal import AppraisalOutcome
from affect_memory.kernel.bounds import check_conversation_id
from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.engine_settings import (
    DEFAULT_APPRAISAL_POLICY,
    DEFAULT_ENGINE_LIMITS,
    DEFAULT_ENGINE_POLICIES,
    DEFAULT_ENGINE_PRESENTATION,
    DEFAULT_ENGINE_RETRIEVAL,
    EngineLimits,
    EnginePolicies,
    EnginePresentation,
    EngineRetrieval,
    GateErrorMode,
    normalize_intent,
    normalized_intent,
)
from affect_memory.kernel.errors import (
    InvalidInputError,
    LimitExceededError,
    MalformedOutputError,
    shown,
)
from affect_memory.kernel.models import AffectState, CognitionState, EmotionMap, MemoryCandidate
from affect_memory.kernel.prompt import build_system_prompt, build_untrusted_context
from affect_memory.kernel.protocols import (
    GateInput,
    GateResult,
    GenerateInput,
    MemoryRetriever,
    Message,
    ModelAdapter,
    OutboxItem,
    RankedRetriever,
    RetrievalInput,
    StateStore,
    TurnEffects,
    TurnRecord,
    TurnResult,
)
from affect_memory.kernel.ranking import rank_candidates
from affect_memory.kernel.retrieval import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    RetrievalWeights,
    ScoredCandidate,
)
from affect_memory.kernel.surfacing import build_presence_vector

__all__ = [
    "DEFAULT_APPRAISAL_POLICY",
    "DEFAULT_ENGINE_LIMITS",
    "DEFAULT_ENGINE_POLICIES",
    "DEFAULT_ENGINE_PRESENTATION",
    "DEFAULT_ENGINE_RETRIEVAL",
    "STAGES",
    "AffectEngine",
    "EngineLimits",
    "EnginePolicies",
    "EnginePresentation",
    "EngineRetrieval",
    "GateErrorMode",
    "StageObserver",
    "normalize_intent",
]

logger = logging.getLogger(__name__)

StageObserver = Callable[[str, float], None]
"""Called with a stage name and its duration in seconds; see ``STAGES``."""

STAGES = (
    "lock",
    "load",
    "gate",
    "retrieve",
    "rank",
    "appraise",
    "prompt",
    "generate",
    "commit",
    "effects",
)
"""Stage names an observer can see, in turn order; stages a turn skips are not reported."""

_FALLBACK_INTENT = "CASUAL"

_MOVED = {
    "retrieval_limit": "limits=EngineLimits",
    "max_retrieval_candidates": "limits=EngineLimits",
    "weights": "retrieval=EngineRetrieval",
    "skip_history_echoes": "retrieval=EngineRetrieval",
    "appraisal_policy": "policies=EnginePolicies",
    "gate_error_mode": "policies=EnginePolicies",
    "custom_intents": "policies=EnginePolicies",
    "state_factory": "policies=EnginePolicies",
    "prompt_wording": "presentation=EnginePresentation",
    "evidence_limits": "presentation=EnginePresentation",
    "affect_controls": "presentation=EnginePresentation",
    "presence_labels": "presentation=EnginePresentation",
    "base_tokens": "presentation=EnginePresentation",
}
"""Keywords ``AffectEngine`` took before its settings became value objects, and their home."""


def _refuse_moved(keywords: Sequence[str]) -> None:
    """Raise the TypeError Python would for a keyword, naming a moved keyword's value object."""
    for name in keywords:
        home = _MOVED.get(name)
        if home is None:
            raise TypeError(f"AffectEngine() got an unexpected keyword argument {name!r}")
        raise TypeError(
            f"AffectEngine() no longer takes {name}=; pass {home}({name}=...) instead"
        )


def _require(value: object, name: str, methods: Sequence[str]) -> None:
    missing = [method for method in methods if not callable(getattr(value, method, None))]
    if missing:
        raise InvalidInputError(
            f"{name} must provide {', '.join(methods)}; {value!r} lacks {', '.join(missing)}"
        )


def _retriever_weights(retriever: object) -> RetrievalWeights:
    """The weights a retriever prepares its candidates for, else the kernel's defaults."""
    offered = getattr(retriever, "ranking_weights", None)
    if offered is None:
        return DEFAULT_RETRIEVAL_WEIGHTS
    if not isinstance(offered, RetrievalWeights):
        raise InvalidInputError(
            f"retriever.ranking_weights must be RetrievalWeights, got {shown(offered)}"
        )
    return offered


def _refuse_hiding_wrapper(retriever: object) -> None:
    """Refuse a retriever that names what it wraps (``__wrapped__``) but hides the wrapped
    one's ranking (``retrieve_ranked``, ``ranking_weights``): turns would silently rank with
    the kernel's defaults instead of as the wrapped store's own recall ranks."""
    wrapped = getattr(retriever, "__wrapped__", None)
    if wrapped is None:
        return
    hidden = [
        name
        for name in ("retrieve_ranked", "ranking_weights")
        if getattr(wrapped, name, None) is not None and getattr(retriever, name, None) is None
    ]
    if hidden:
        raise InvalidInputError(
            f"retriever {retriever!r} wraps {wrapped!r} but hides its {' and '.join(hidden)}, "
            "so turns would rank with the kernel's defaults instead of as the wrapped "
            "retriever ranks; forward them (subclass affect_memory.kernel.DelegatingRetriever)"
        )


def _refuse_other_users(
    user_id: str | None, retriever: object, effects: Sequence[TurnEffects]
) -> None:
    """Refuse collaborators bound to different users (their optional ``user_id``): a turn
    would surface one user's memories and write another's."""
    bound = [("the engine", user_id), ("the retriever", getattr(retriever, "user_id", None))]
    bound += [(f"turn effect {effect!r}", getattr(effect, "user_id", None)) for effect in effects]
    users = [(name, user) for name, user in bound if isinstance(user, str)]
    for name, user in users[1:]:
        if user != users[0][1]:
            raise InvalidInputError(
                f"{name} is bound to user_id {shown(user)} but {users[0][0]} to "
                f"{shown(users[0][1])}; a turn must read and write one user's memories"
            )


def _window(messages: tuple[Message, ...], limits: EngineLimits) -> tuple[Message, ...]:
    """The newest messages that fit both history limits, in order."""
    kept = messages[-limits.max_history_messages :]
    total = sum(len(message.content) for message in kept)
    start = 0
    while total > limits.max_history_chars and start < len(kept):
        total -= len(kept[start].content)
        start += 1
    return kept[start:]


class _Stopwatch:
    """Reports stage durations to an observer; does nothing when there is none."""

    __slots__ = ("_mark", "_observer")

    def __init__(self, observer: StageObserver | None) -> None:
        self._observer = observer
        self._mark = perf_counter() if observer is not None else 0.0

    def lap(self, stage: str) -> None:
        if self._observer is None:
            return
        now = perf_counter()
        try:
            self._observer(stage, now - self._mark)
        except Exception:  # an observer must never fail, or half-fail, a turn
            logger.exception("stage observer failed at stage %r; observing stops", stage)
            self._observer = None
        self._mark = perf_counter()


class AffectEngine:
    """Runs turns of one conversation against a model, a store and optional retrieval."""

    def __init__(
        self,
        *,
        model: ModelAdapter,
        store: StateStore,
        conversation_id: str,
        retriever: MemoryRetriever | RankedRetriever | None = None,
        effects: Sequence[TurnEffects] = (),
        user_id: str | None = None,
        clock: Clock = utc_now,
        observer: StageObserver | None = None,
        limits: EngineLimits = DEFAULT_ENGINE_LIMITS,
        retrieval: EngineRetrieval = DEFAULT_ENGINE_RETRIEVAL,
        policies: EnginePolicies = DEFAULT_ENGINE_POLICIES,
        presentation: EnginePresentation = DEFAULT_ENGINE_PRESENTATION,
        **moved: Never,
    ) -> None:
        """Check every collaborator and setting; each setting has one place, in ``limits``,
        ``retrieval``, ``policies`` or ``presentation``. A keyword of the old flat signature
        (``retrieval_limit=``, ``weights=``, ``base_tokens=``, ...) raises a TypeError naming
        the value object that now holds it (``moved`` takes no valid keyword).
        Without ``retrieval.weights`` the engine ranks with the retriever's
        ``ranking_weights`` when it has them (so a turn ranks as that store's recall does),
        else with the kernel's defaults. A retriever with ``retrieve_ranked``
        (``RankedRetriever``) ranks its own memories: the engine asks it instead of
        ``retrieve`` (which it then need not have), with ``retrieval.weights`` or none (it then
        ranks with its own settings), takes its order as it is and drops the history echoes
        from it; a subclass that changes what ``retrieve`` returns must change
        ``retrieve_ranked`` too. To wrap a retriever (to log or record its calls), subclass
        ``DelegatingRetriever``, which offers whatever the wrapped one offers; a wrapper that
        names what it wraps (``__wrapped__``) but hides its ``retrieve_ranked`` or
        ``ranking_weights`` is refused."""
        _refuse_moved(list(moved))
        _require(model, "model", ("gate", "generate"))
        _require(store, "store", ("transaction", "pending_outbox", "complete_outbox"))
        _refuse_hiding_wrapper(retriever)
        ranked = isinstance(retriever, RankedRetriever) and callable(
            getattr(retriever, "retrieve_ranked", None)
        )
        if retriever is not None and not ranked:
            _require(retriever, "retriever", ("retrieve",))
        if not callable(clock):
            raise InvalidInputError(f"clock must be callable, got {clock!r}")
        if observer is not None and not callable(observer):
            raise InvalidInputError(f"observer must be callable, got {observer!r}")
        check_conversation_id(conversation_id)
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInputError(f"user_id must be a string or None, got {user_id!r}")
        settings: tuple[tuple[str, object, type[object]], ...] = (
            ("limits", limits, EngineLimits),
            ("retrieval", retrieval, EngineRetrieval),
            ("policies", policies, EnginePolicies),
            ("presentation", presentation, EnginePresentation),
        )
        for name, value, kind in settings:
            if not isinstance(value, kind):
                raise InvalidInputError(f"{name} must be {kind.__name__}, got {shown(value)}")
        weights = retrieval.weights
        if weights is None:
            weights = _retriever_weights(retriever)
        for effect in effects:
            _require(effect, "turn effect", ("plan", "apply"))
            if not isinstance(getattr(effect, "topic", None), str):
                raise InvalidInputError(f"turn effect {effect!r} needs a string topic")
        _refuse_other_users(user_id, retriever, effects)
        self._model = model
        self._store = store
        self._conversation_id = conversation_id
        self._retriever = retriever
        self._ranked_retriever = ranked
        """Whether the retriever ranks its own memories: a turn takes its order as it is."""
        self._policy = policies.appraisal_policy
        self._state_factory = policies.state_factory
        self._gate_error_mode: GateErrorMode = policies.gate_error_mode
        self._custom_intents = frozenset(policies.custom_intents)
        self._limits = limits
        self._effects = tuple(effects)
        self._user_id = user_id
        self._clock = clock
        self._wording = presentation.prompt_wording
        self._evidence_limits = presentation.evidence_limits
        self._controls = presentation.affect_controls
        self._labels = presentation.presence_labels
        self._base_tokens = presentation.base_tokens
        self._observer = observer
        self._skip_history_echoes = retrieval.skip_history_echoes
        self._given_weights = retrieval.weights
        """The weights the engine was given, if any: a ranked retriever ranks with its own
        settings unless the engine was given weights to impose."""
        self._weights = weights

    @property
    def conversation_id(self) -> str:
        """The conversation this engine runs."""
        return self._conversation_id

    @property
    def limits(self) -> EngineLimits:
        """The limits every turn enforces."""
        return self._limits

    @property
    def weights(self) -> RetrievalWeights:
        """The ranking settings every turn scores its memories with."""
        return self._weights

    async def turn(self, text: str, on_token: Callable[[str], object] | None = None) -> TurnResult:
        """Run and commit one turn for ``text``; ``on_token`` sees each reply chunk as it streams.

        Chunks reach ``on_token`` before the commit: if the turn then fails, nothing of it
        is stored even though the caller has seen part of the reply. A turn cancelled while
        its commit is being written may still be committed; it is never half-written.
        """
        self._check_text(text)
        if on_token is not None and not callable(on_token):
            raise InvalidInputError(f"on_token must be callable, got {on_token!r}")
        now = self._now()
        watch = _Stopwatch(self._observer)
        planned: list[tuple[TurnEffects, tuple[OutboxItem, ...]]] = []
        async with self._store.transaction(self._conversation_id) as transaction:
            watch.lap("lock")
            state, transcript = await asyncio.gather(
                transaction.load_state(),
                transaction.load_transcript(self._limits.max_history_messages),
            )
            if state is None:
                state = self._fresh_state()
            elif not isinstance(state, AffectState):
                raise MalformedOutputError(
                    f"store returned {type(state).__name__}, not AffectState"
                )
            if not isinstance(transcript, tuple) or not all(
                isinstance(message, Message) for message in transcript
            ):
                raise MalformedOutputError("store returned a transcript that is not Messages")
            first_turn = not transcript
            history = _window(transcript, self._limits)
            watch.lap("load")
            exposed = state.model_copy(update={"carried_thought": None})
            gate = await self._gate(text, history, exposed)
            watch.lap("gate")
            stamp = now.isoformat()
            user_message = Message(role="user", content=text, timestamp=stamp)
            if gate is None or not gate.should_respond:
                intent = _FALLBACK_INTENT if gate is None else gate.intent
                if self._effects:
                    planned = self._plan(
                        self._record(now, user_message, None, intent, state, EmotionMap(), ())
                    )
                await transaction.commit(
                    state=None,
                    messages=(user_message,),
                    outbox=[item for _, items in planned for item in items],
                )
                watch.lap("commit")
                result = TurnResult(
                    text="", intent=intent, silent=True, mood=state.mood, emotions=EmotionMap()
                )
            else:
                candidates: Sequence[MemoryCandidate] = ()
                memories: tuple[ScoredCandidate, ...] = ()
                # retrieval_limit 0 ranks nothing, so the retriever is not asked at all.
                if (
                    gate.should_retrieve
                    and self._retriever is not None
                    and self._limits.retrieval_limit > 0
                ):
                    if self._ranked_retriever:  # its order, as it is
                        memories = await self._retrieve_ranked(text, history, exposed, now)
                    else:
                        candidates = await self._retrieve(text, history, exposed, now)
                    watch.lap("retrieve")
                if candidates:
                    memories = rank_candidates(
                        candidates,
                        now,
                        mood_valence=state.mood.valence,
                        limit=self._limits.retrieval_limit,
                        weights=self._weights,
                    )
                    watch.lap("rank")
                outcome = self._appraise(state, gate.intent, text)
                watch.lap("appraise")
                request = self._generate_input(
                    text, history, state, outcome, memories, first_turn=first_turn
                )
                watch.lap("prompt")
                reply = await self._generate(request, on_token)
                watch.lap("generate")
                assistant_message = Message(role="assistant", content=reply, timestamp=stamp)
                # A reply without text is not a message: an appraisal-only turn commits the
                # state and the user's message alone.
                said = (user_message, assistant_message) if reply else (user_message,)
                if self._effects:
                    planned = self._plan(
                        self._record(
                            now,
                            user_message,
                            assistant_message,
                            gate.intent,
                            outcome.state,
                            outcome.active_emotions,
                            memories,
                        )
                    )
                await transaction.commit(
                    state=outcome.state,
                    messages=said,
                    outbox=[item for _, items in planned for item in items],
                )
                watch.lap("commit")
                result = TurnResult(
                    text=reply,
                    intent=gate.intent,
                    silent=False,
                    mood=outcome.state.mood,
                    emotions=outcome.active_emotions,
                    memories=memories,
                )
        if planned:
            await self._apply_effects(planned)
            watch.lap("effects")
        return result

    async def presence(self, cognition: CognitionState | None = None) -> dict[str, Any]:
        """The presence payload of the committed state (waits for a running turn to finish)."""
        if cognition is not None and not isinstance(cognition, CognitionState):
            raise InvalidInputError(f"cognition must be CognitionState, got {cognition!r}")
        async with self._store.transaction(self._conversation_id) as transaction:
            state = await transaction.load_state()
        if state is None:
            state = self._fresh_state()
        return build_presence_vector(state, cognition, labels=self._labels)

    def _check_text(self, text: object) -> None:
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise InvalidInputError("text must not be empty or only whitespace")
        if len(text) > self._limits.max_message_chars:
            raise LimitExceededError(
                f"message has {len(text):,} characters; the limit is "
                f"{self._limits.max_message_chars:,} (EngineLimits.max_message_chars)"
            )

    def _now(self) -> datetime:
        moment = self._clock()
        if not isinstance(moment, datetime) or moment.utcoffset() is None:
            raise InvalidInputError(f"clock must return a zoned datetime, got {moment!r}")
        return moment.astimezone(UTC)

    def _fresh_state(self) -> AffectState:
        state = self._state_factory()
        if not isinstance(state, AffectState):
            raise InvalidInputError(
                f"state_factory must return AffectState, got {type(state).__name__}"
            )
        return state

    async def _gate(
        self, text: str, history: tuple[Message, ...], state: AffectState
    ) -> GateResult | None:
        """The checked gate result with a normalized intent; None means stay silent."""
        try:
            result = await self._model.gate(GateInput(message=text, history=history, state=state))
            if not isinstance(result, GateResult):
                raise MalformedOutputError(f"gate returned {type(result).__name__}, not GateResult")
            intent = normalized_intent(result.intent, self._custom_intents)
        except Exception as error:
            if self._gate_error_mode == "raise":
                raise
            logger.warning(
                "gate failed (%s: %s); continuing as %s",
                type(error).__name__,
                error,
                "CASUAL" if self._gate_error_mode == "respond" else "silent",
            )
            if self._gate_error_mode == "silent":
                return None
            return GateResult(intent=_FALLBACK_INTENT, should_respond=True, should_retrieve=False)
        if intent != result.intent:
            result = result.model_copy(update={"intent": intent})
        return result

    def _retrieval_input(
        self,
        text: str,
        history: tuple[Message, ...],
        state: AffectState,
        now: datetime,
        *,
        limit: int,
        weights: RetrievalWeights | None,
    ) -> RetrievalInput:
        return RetrievalInput(
            query=text, history=history, state=state, limit=limit, now=now, weights=weights
        )

    def _checked(self, found: object, kind: type[Any]) -> list[Any]:
        """The retriever's answer as a list of ``kind``, refused whole when malformed or over
        the limit (the callers then leave out what the history window already shows)."""
        cap = self._limits.max_retrieval_candidates
        if not isinstance(found, list | tuple):
            raise MalformedOutputError(
                f"retriever returned {type(found).__name__}, not a list or tuple of "
                f"{kind.__name__}"
            )
        if len(found) > cap:
            raise LimitExceededError(
                f"retriever returned {len(found)} candidates; the limit is {cap} "
                "(EngineLimits.max_retrieval_candidates)"
            )
        for index, candidate in enumerate(found):
            if not isinstance(candidate, kind):
                raise MalformedOutputError(
                    f"retriever candidate {index} is {type(candidate).__name__}, "
                    f"not {kind.__name__}"
                )
        return list(found)

    def _without_echoes(self, history: tuple[Message, ...], texts: Sequence[str]) -> list[bool]:
        """Which of ``texts`` to keep: a memory whose text is a message the model already sees
        in the history window adds nothing, and its fresh timestamp would crowd older facts
        out of the ranking."""
        if not (self._skip_history_echoes and history):
            return [True] * len(texts)
        echoes = {message.content.strip() for message in history}
        return [text.strip() not in echoes for text in texts]

    async def _retrieve(
        self, text: str, history: tuple[Message, ...], state: AffectState, now: datetime
    ) -> Sequence[MemoryCandidate]:
        assert isinstance(self._retriever, MemoryRetriever)
        request = self._retrieval_input(
            text,
            history,
            state,
            now,
            limit=self._limits.max_retrieval_candidates,
            weights=self._weights,
        )
        found = self._checked(await self._retriever.retrieve(request), MemoryCandidate)
        keep = self._without_echoes(history, [candidate.text for candidate in found])
        return [candidate for candidate, kept in zip(found, keep, strict=True) if kept]

    async def _retrieve_ranked(
        self, text: str, history: tuple[Message, ...], state: AffectState, now: datetime
    ) -> tuple[ScoredCandidate, ...]:
        """The ranked retriever's best memories in its own order, cut to the turn's limit; it
        is asked for the limit and as many more as the history window could echo."""
        assert isinstance(self._retriever, RankedRetriever)
        wanted = self._limits.retrieval_limit + (len(history) if self._skip_history_echoes else 0)
        request = self._retrieval_input(
            text,
            history,
            state,
            now,
            limit=min(self._limits.max_retrieval_candidates, wanted),
            weights=self._given_weights,
        )
        found = self._checked(await self._retriever.retrieve_ranked(request), ScoredCandidate)
        keep = self._without_echoes(history, [scored.candidate.text for scored in found])
        kept = [scored for scored, chosen in zip(found, keep, strict=True) if chosen]
        return tuple(kept[: self._limits.retrieval_limit])

    def _appraise(self, state: AffectState, intent: str, text: str) -> AppraisalOutcome:
        outcome = self._policy.appraise(state, intent, text)
        if not isinstance(outcome, AppraisalOutcome):
            raise MalformedOutputError(
                f"appraisal policy returned {type(outcome).__name__}, not AppraisalOutcome"
            )
        return outcome

    def _generate_input(
        self,
        text: str,
        history: tuple[Message, ...],
        state: AffectState,
        outcome: AppraisalOutcome,
        memories: tuple[ScoredCandidate, ...],
        *,
        first_turn: bool,
    ) -> GenerateInput:
        mood = outcome.state.mood
        system_prompt = build_system_prompt(
            outcome.state, outcome.active_emotions, wording=self._wording
        )
        if len(system_prompt) > self._limits.max_system_prompt_chars:
            raise LimitExceededError(
                f"system prompt has {len(system_prompt):,} characters; the limit is "
                f"{self._limits.max_system_prompt_chars:,} (EngineLimits.max_system_prompt_chars)"
            )
        evidence = build_untrusted_context(
            [memory.candidate.text for memory in memories],
            state.carried_thought,
            first_turn=first_turn,
            limits=self._evidence_limits,
        )
        return GenerateInput(
            message=text,
            system_prompt=system_prompt,
            history=history,
            state=outcome.state.model_copy(update={"carried_thought": None}),
            intent=outcome.intent,
            emotions=outcome.active_emotions,
            decoding=_decoding_params(mood, controls=self._controls),
            untrusted_context=evidence,
            max_tokens=apply_length_factor(self._base_tokens, mood, controls=self._controls),
        )

    async def _generate(
        self, request: GenerateInput, on_token: Callable[[str], object] | None
    ) -> str:
        stream = self._model.generate(request)
        if not isinstance(stream, AsyncIterator):
            raise MalformedOutputError(
                f"generate returned {type(stream).__name__}, not an async iterator of str"
            )
        cap = self._limits.max_output_chars
        chunks: list[str] = []
        total = 0
        try:
            async for chunk in stream:
                if not isinstance(chunk, str):
                    raise MalformedOutputError(
                        f"generate yielded {type(chunk).__name__} at chunk {len(chunks)}, not str"
                    )
                total += len(chunk)
                if total > cap:
                    raise LimitExceededError(
                        f"model output passed {cap:,} characters (EngineLimits.max_output_chars)"
                    )
                chunks.append(chunk)
                if on_token is not None:
                    outcome = on_token(chunk)
                    if inspect.isawaitable(outcome):
                        await outcome
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        return "".join(chunks)

    def _record(
        self,
        now: datetime,
        message: Message,
        reply: Message | None,
        intent: str,
        state: AffectState,
        emotions: EmotionMap,
        memories: tuple[ScoredCandidate, ...],
    ) -> TurnRecord:
        return TurnRecord(
            conversation_id=self._conversation_id,
            turn_time=now,
            user_id=self._user_id,
            message=message,
            reply=reply,
            intent=intent,
            state=state,
            active_emotions=emotions,
            memories=memories,
        )

    def _plan(self, record: TurnRecord) -> list[tuple[TurnEffects, tuple[OutboxItem, ...]]]:
        planned: list[tuple[TurnEffects, tuple[OutboxItem, ...]]] = []
        for effect in self._effects:
            items = effect.plan(record)
            if not isinstance(items, list | tuple):
                raise MalformedOutputError(
                    f"turn effect {effect.topic!r} planned {type(items).__name__}, "
                    "not a list or tuple of OutboxItem"
                )
            for item in items:
                if not isinstance(item, OutboxItem):
                    raise MalformedOutputError(
                        f"turn effect {effect.topic!r} planned {type(item).__name__}, "
                        "not OutboxItem"
                    )
                if item.topic != effect.topic:
                    raise MalformedOutputError(
                        f"turn effect {effect.topic!r} planned an item for topic {item.topic!r}"
                    )
            if items:
                planned.append((effect, tuple(items)))
        return planned

    async def _apply_effects(
        self, planned: Sequence[tuple[TurnEffects, tuple[OutboxItem, ...]]]
    ) -> None:
        """Apply each effect's items after the commit; a failure leaves them pending."""
        for effect, items in planned:
            try:
                await effect.apply(items)
                await self._store.complete_outbox([item.id for item in items])
            except Exception:
                logger.exception(
                    "turn effect %r failed for conversation %r; %d outbox item(s) stay pending",
                    effect.topic,
                    self._conversation_id,
                    len(items),
                )
