"""An OpenAI-compatible chat-completions model adapter: streamed generation and a pluggable gate.

It speaks ``POST {base_url}/chat/completions`` as OpenAI, vLLM, Ollama and the llama.cpp server
do. What goes where on the wire is ``affect_memory.models.openai_wire``'s, the model-backed gate
``affect_memory.models.openai_gate``'s, and keeping secrets out of sight
``affect_memory.models.openai_redaction``'s.

Every failure of the endpoint is translated here, at the boundary, into ``affect_memory.errors``.
A stream that ends without ``data: [DONE]`` is an error, not a short reply: without the
terminator a truncated reply cannot be told from a complete one, and the engine must not commit
a truncated reply. Chunks already yielded before an error are part of a failed turn.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final, Literal

import httpx

from affect_memory.errors import (
    GateUnavailableError,
    MalformedGateReplyError,
    MalformedStreamError,
    ModelAdapterError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.protocols import GateInput, GateResult, GenerateInput, IntentGate
from affect_memory.models.openai_gate import (
    DEFAULT_GATE_INSTRUCTIONS,
    gate_request_body,
    parse_gate_reply,
)
from affect_memory.models.openai_redaction import (
    check_base_url,
    key_problem,
    redact_chain,
    redact_text,
    redact_url,
)
from affect_memory.models.openai_wire import (
    DEFAULT_EVIDENCE_PREAMBLE,
    StreamReader,
    build_chat_messages,
    error_text,
    excerpt,
    media_type,
)
from affect_memory.redaction import install_log_redaction, remember_secrets

__all__ = ["OpenAICompatibleModel"]

_log = logging.getLogger(__name__)

_RESERVED_BODY_KEYS: Final = frozenset(
    {"model", "messages", "stream", "temperature", "top_p", "max_tokens"}
)
_MAX_BODY_BYTES: Final = 1 << 20
"""Largest non-streamed reply body read, for the model-backed gate."""
_ERROR_BODY_BYTES: Final = 4096


class OpenAICompatibleModel:
    """A ``ModelAdapter`` over any OpenAI-compatible ``/chat/completions`` endpoint.

    ``gate`` is an object with ``async gate(GateInput)``, the string ``"model"`` to let the
    chat endpoint classify intents, or None for the default embedding gate
    (``affect_memory.gate.classifier.EmbeddingIntentGate``).
    ``timeout`` bounds connecting and every wait for the next bytes, not the whole reply.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        gate: IntentGate | Literal["model"] | None = None,
        *,
        timeout: float = 30.0,
        evidence_preamble: str = DEFAULT_EVIDENCE_PREAMBLE,
        gate_instructions: str = DEFAULT_GATE_INSTRUCTIONS,
        gate_json_mode: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidInputError(
                f"base_url must be an http:// or https:// URL such as "
                f"'http://127.0.0.1:8000/v1', got {shown(redact_url(base_url))}"
            )
        base_url, url_secrets = check_base_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise InvalidInputError(f"model must be a non-empty string, got {shown(model)}")
        if api_key is not None:
            if not isinstance(api_key, str):
                raise InvalidInputError(
                    f"api_key must be a string or None, got a {type(api_key).__name__}"
                )
            api_key = api_key.strip() if api_key else None
        if api_key is not None:
            problem = key_problem(api_key)
            if problem is not None:
                raise InvalidInputError(
                    f"api_key {problem}; an HTTP header takes printable ASCII only "
                    "(check the key's source, e.g. a .env file)"
                )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise InvalidInputError(
                f"timeout must be a finite number of seconds > 0, got {shown(timeout)}"
            )
        if gate is not None and gate != "model" and not callable(getattr(gate, "gate", None)):
            raise InvalidInputError(
                "gate must be None, 'model' or an object with async gate(GateInput), "
                f"got {shown(gate)}"
            )
        for name, text in (
            ("evidence_preamble", evidence_preamble),
            ("gate_instructions", gate_instructions),
        ):
            if not isinstance(text, str) or not text.strip():
                raise InvalidInputError(f"{name} must be a non-empty string, got {shown(text)}")
        body = dict(extra_body or {})
        clashes = sorted(_RESERVED_BODY_KEYS & body.keys())
        if clashes:
            raise InvalidInputError(f"extra_body must not set {clashes}: the adapter owns them")
        try:
            json.dumps(body, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidInputError(f"extra_body must be JSON-serializable: {error}") from None
        endpoint, _, query = base_url.partition("?")
        self._endpoint = f"{endpoint.rstrip('/')}/chat/completions" + (query and f"?{query}")
        self._base_url = redact_url(base_url.rstrip("/"))  # shown: no ?api_key=
        self._url = redact_url(self._endpoint)  # what messages and logs name
        self._model = model
        self._api_key = api_key or None
        self._secrets: tuple[str, ...] = url_secrets + ((self._api_key,) if self._api_key else ())
        remember_secrets(self._secrets)  # HTTP clients' own log records are masked too
        install_log_redaction()
        self._gate: IntentGate | None = None if gate == "model" else gate
        self._model_gate = gate == "model"
        self._timeout = httpx.Timeout(float(timeout))
        self._timeout_seconds = float(timeout)
        self._preamble = evidence_preamble
        self._gate_instructions = gate_instructions
        self._gate_json_mode = gate_json_mode
        self._extra_body = body
        self._client = client
        self._owns_client = client is None

    @property
    def base_url(self) -> str:
        """The endpoint's base URL, without a trailing slash."""
        return self._base_url

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._model

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        gate = "'model'" if self._model_gate else repr(self._gate)
        return (
            f"OpenAICompatibleModel(base_url={self._base_url!r}, model={self._model!r}, "
            f"api_key={key}, gate={gate})"
        )

    async def __aenter__(self) -> OpenAICompatibleModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it; a passed-in client is left open."""
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    # -- the ModelAdapter protocol -------------------------------------------------------------

    async def gate(self, request: GateInput) -> GateResult:
        """Classify the message with the configured gate."""
        if self._model_gate:
            return await self._classify_with_model(request)
        return await self._resolve_gate().gate(request)

    async def generate(self, request: GenerateInput) -> AsyncIterator[str]:
        """Stream the reply's text chunks from the endpoint, in order."""
        body: dict[str, Any] = {
            **self._extra_body,
            "model": self._model,
            "messages": build_chat_messages(request, preamble=self._preamble),
            "temperature": request.decoding.temperature,
            "stream": True,
        }
        if request.decoding.top_p is not None:
            body["top_p"] = request.decoding.top_p
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        chunks = 0
        try:
            async with self._http().stream(
                "POST", self._endpoint, json=body, **self._request_options("text/event-stream")
            ) as response:
                await self._raise_for_status(response)
                if media_type(response) != "text/event-stream":
                    body_excerpt = await self._body_excerpt(response)
                    raise MalformedStreamError(
                        f"{self._url} answered {shown(response.headers.get('content-type'))} "
                        "instead "
                        f"of 'text/event-stream'; does this server stream chat completions? "
                        f"Body: {body_excerpt}"
                    )
                reader = StreamReader(self._url, self._redact)
                async for data in reader.data(response):
                    if data == "[DONE]":
                        return
                    text = reader.chunk_text(data)
                    if text:
                        chunks += 1
                        yield text
                raise MalformedStreamError(
                    f"the stream from {self._url} ended without 'data: [DONE]' after {chunks} "
                    "chunk(s); the reply may be truncated"
                )
        except httpx.HTTPError as error:
            where = f"after {chunks} chunk(s)" if chunks else "before any text arrived"
            redact_chain(error, self._secrets)
            raise self._translate(error, where) from error

    # -- gates -----------------------------------------------------------------------------------

    def _resolve_gate(self) -> IntentGate:
        if self._gate is not None:
            return self._gate
        advice = "pass gate=<an object with async gate(GateInput)> or gate='model'"
        try:
            from affect_memory.gate.classifier import EmbeddingIntentGate
        except ImportError as error:
            raise GateUnavailableError(
                "no gate was passed and the default embedding gate "
                f"(plugin.gate.classifier.EmbeddingIntentGate) cannot be imported ({error}); "
                f"{advice}"
            ) from error
        try:
            built: IntentGate = EmbeddingIntentGate()
        except Exception as error:
            raise GateUnavailableError(
                f"the default EmbeddingIntentGate could not be built ({error}); {advice}"
            ) from error
        self._gate = built
        return built

    async def _classify_with_model(self, request: GateInput) -> GateResult:
        body = gate_request_body(
            request,
            model=self._model,
            instructions=self._gate_instructions,
            json_mode=self._gate_json_mode,
            extra=self._extra_body,
        )
        try:
            async with self._http().stream(
                "POST", self._endpoint, json=body, **self._request_options("application/json")
            ) as response:
                await self._raise_for_status(response)
                raw = await self._read_capped(response)
        except httpx.HTTPError as error:
            redact_chain(error, self._secrets)
            raise self._translate(error, "while classifying the intent") from error
        return parse_gate_reply(raw, self._url, self._redact)

    # -- HTTP plumbing ---------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        return self._client

    def _request_options(self, accept: str) -> dict[str, Any]:
        """Headers and timeout of a request."""
        headers = {"Accept": accept}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        _log.debug("POST %s model=%s accept=%s", self._url, self._model, accept)
        return {"headers": headers, "timeout": self._timeout}

    def _redact(self, text: str) -> str:
        """``text`` without any form of the API key or of the base URL's secrets."""
        return redact_text(text, self._secrets)

    def _translate(self, error: httpx.HTTPError, where: str) -> ModelAdapterError:
        detail = self._redact(str(error)) or type(error).__name__
        if isinstance(error, httpx.TimeoutException):
            return ModelTimeoutError(
                f"{self._url} timed out {where} ({type(error).__name__}, timeout="
                f"{self._timeout_seconds:g}s); raise timeout= or check that the server is healthy"
            )
        if isinstance(error, httpx.ConnectError):
            return ModelConnectionError(
                f"cannot connect to {self._url} ({detail}); is the model server running there?"
            )
        if isinstance(error, httpx.DecodingError):
            return MalformedStreamError(f"{self._url} sent an undecodable body {where}: {detail}")
        if isinstance(error, httpx.TransportError):
            return ModelConnectionError(f"the connection to {self._url} broke {where}: {detail}")
        return ModelAdapterError(f"request to {self._url} failed {where}: {detail}")

    async def _raise_for_status(self, response: httpx.Response) -> None:
        if response.is_success:
            return
        excerpt = await self._body_excerpt(response)
        status = response.status_code
        hint = ""
        if status in (401, 403):
            hint = " (check api_key)"
        elif status == 404:
            hint = " (check base_url, which usually ends in /v1, and the model name)"
        raise ModelHTTPError(
            f"{self._url} answered HTTP {status} {response.reason_phrase}{hint}: {excerpt}",
            status_code=status,
            body_excerpt=excerpt,
        )

    async def _body_excerpt(self, response: httpx.Response) -> str:
        """A short, single-line, key-free excerpt of a body, preferring an ``error.message``."""
        raw = b""
        try:
            async for piece in response.aiter_bytes():
                raw += piece
                if len(raw) >= _ERROR_BODY_BYTES:
                    break
        except httpx.HTTPError as error:
            return f"(body unreadable: {type(error).__name__})"
        text = raw[:_ERROR_BODY_BYTES].decode("utf-8", errors="replace")
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        if isinstance(payload, Mapping) and "error" in payload:
            text = error_text(payload["error"])
        return excerpt(self._redact(text)) or "(empty body)"

    async def _read_capped(self, response: httpx.Response) -> bytes:
        raw = b""
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) > _MAX_BODY_BYTES:
                raise MalformedGateReplyError(
                    f"{self._url} sent a reply over {_MAX_BODY_BYTES} bytes to a classification"
                )
        return raw
