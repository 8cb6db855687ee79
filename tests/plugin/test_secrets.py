"""No secret is ever echoed: every door that takes a URL or a key, with generated credentials.

Each case checks the secret's raw, URL-encoded, JSON-escaped and base64 forms against the
exception's message, ``repr`` and formatted traceback, every log record (DEBUG) and, for the
CLI, stdout and stderr. PostgreSQL doors point at a closed local port, so they fail at once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affect_memory.errors import ModelHTTPError
from affect_memory.kernel.errors import AffectMemoryError
from affect_memory.memory.chroma.location import parse_location
from affect_memory.memory.index.storage.opening import resolve_index
from affect_memory.models.openai_adapter import OpenAICompatibleModel
from affect_memory.redaction import redact, redact_url
from affect_memory.state.location import open_state_store, parse_state_url
from tests.plugin.models.test_openai_adapter import GATE_INPUT, generation

_SPECIAL = "/@:%?"
_PLAIN = "abcdefghkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789_-.~"
_FOREIGN = "éüßøñ中文ЖЩ𝄞"

passwords = st.builds(
    lambda head, body, tail: f"{head}{body}{tail}",
    st.text(alphabet=_PLAIN, min_size=3, max_size=3),
    st.text(alphabet=_PLAIN + _SPECIAL + _FOREIGN, min_size=4, max_size=18),
    st.text(alphabet=_PLAIN, min_size=3, max_size=3),
).filter(lambda text: any(char in _SPECIAL for char in text))
"""Passwords holding / @ : % ? (and often non-ASCII), framed by letters so no form is generic."""

header_keys = st.builds(
    lambda head, body: f"sk-{head}{body}",
    st.text(alphabet=_PLAIN, min_size=4, max_size=4),
    st.text(alphabet=_PLAIN + _SPECIAL, min_size=6, max_size=30),
)
"""API keys an HTTP header can carry: printable ASCII, with / @ : % ?."""


def forms(secret: str) -> set[str]:
    """Every form a secret might be shown in."""
    raw = secret.encode()
    found = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        base64.b64encode(raw).decode().rstrip("="),
    }
    return {form for form in found if len(form) >= 6}


def assert_hidden(secret: str, *texts: str) -> None:
    """None of ``secret``'s forms appears in any of ``texts`` (case-insensitively)."""
    shown = "\n".join(texts).lower()
    for form in forms(secret):
        assert form.lower() not in shown, (form, shown[:2000])


def everything(error: BaseException) -> str:
    """An exception's message, ``repr`` and fully formatted traceback with its chain."""
    return "\n".join([str(error), repr(error), "".join(traceback.format_exception(error))])


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_CLOSED = closed_port()


def postgres_urls(password: str) -> list[str]:
    """The ways a user may put ``password`` in a PostgreSQL URL."""
    host = f"127.0.0.1:{_CLOSED}"
    encoded = quote(password, safe="")
    return [
        f"postgresql://alice:{password}@{host}/test",
        f"postgres://alice:{encoded}@{host}/test?sslmode=disable",
        f"postgresql://{host}/test?Password={encoded}",
        f"postgresql://{host}/test?password={encoded}&sslmode=bogus",
        f"postgresql://alice:{password}@{host}/test?nope#frag",
        f"postgresql://alice:{password}@127.0.0.1:notaport/test",
    ]


_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record at DEBUG."""
    caplog.set_level(logging.DEBUG)
    yield caplog


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record's message and formatted exception."""
    handler = logging.Formatter()
    return "\n".join(
        record.getMessage() + (handler.formatException(record.exc_info) if record.exc_info else "")
        for record in caplog.records
    )


@_SETTINGS
@given(password=passwords)
def test_a_state_url_never_shows_its_password(
    password: str, debug_logs: pytest.LogCaptureFixture
) -> None:
    debug_logs.clear()
    for url in postgres_urls(password):
        with pytest.raises(AffectMemoryError) as caught:
            open_state_store(url, source="--state", connect_timeout=1)
        assert_hidden(password, everything(caught.value), logged(debug_logs))
        try:
            location = parse_state_url(url, source="--state")
        except AffectMemoryError as error:
            assert_hidden(password, everything(error))
        else:
            assert_hidden(password, repr(location), location.describe())


@_SETTINGS
@given(password=passwords)
def test_an_index_url_never_shows_its_password(
    password: str, debug_logs: pytest.LogCaptureFixture
) -> None:
    from affect_memory.memory.index.storage.opening import open_backend

    debug_logs.clear()
    for url in postgres_urls(password):
        with pytest.raises(AffectMemoryError) as caught:
            target = resolve_index(url, parse_location(":memory:"))
            assert_hidden(password, repr(target), target.describe())
            open_backend(target, lock_timeout=1.0)
        assert_hidden(password, everything(caught.value), logged(debug_logs))


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch embedded store."""
    return tmp_path_factory.mktemp("secrets-chroma")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(password=passwords)
def test_chroma_memory_never_shows_its_index_password(
    password: str, debug_logs: pytest.LogCaptureFixture, memory_dir: Path
) -> None:
    from affect_memory.memory.store import ChromaMemory

    debug_logs.clear()
    for url in postgres_urls(password)[:3]:
        with pytest.raises(AffectMemoryError) as caught:
            ChromaMemory(":memory:", index=url).close()
        assert_hidden(password, everything(caught.value), logged(debug_logs))


@_SETTINGS
@given(password=passwords)
def test_a_chroma_url_never_shows_its_credentials(password: str) -> None:
    encoded = quote(password, safe="")
    for url in (
        f"http://alice:{password}@127.0.0.1:8000/some/path",
        f"ftp://alice:{password}@127.0.0.1:8000",
        f"http://alice:{password}@127.0.0.1:port",
        f"http://127.0.0.1:8000/?token={encoded}",
        f"http://{password}@127.0.0.1:8000/v1",
    ):
        try:
            location = parse_location(url)
        except AffectMemoryError as error:
            assert_hidden(password, everything(error))
        else:
            assert_hidden(password, repr(location), location.describe())
        assert_hidden(password, redact_url(url), redact(f"got {url!r} and {url}"))


# -- the OpenAI-compatible adapter, against an endpoint that echoes what it is sent ------------


class _Echo(BaseHTTPRequestHandler):
    """Answers every POST with 401 or 500, echoing the Authorization header and the path."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        auth = self.headers.get("authorization") or ""
        token = auth.partition(" ")[2]
        echoed = (
            f"{auth} | {self.path} | {quote(token, safe='')} | {quote_plus(token)} | "
            f"{quote(self.path, safe='')} | {base64.b64encode(token.encode()).decode()}"
        )
        status = 500 if "fail" in self.path else 401
        body = json.dumps({"error": {"message": echoed, "raw": self.path, "auth": auth}})
        # Raw bytes beside the JSON-escaped copy: a server that does not escape at all.
        payload = f"{body}\n{echoed}".encode("utf-8", errors="surrogateescape")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Echo", quote(auth, safe=""))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def echo_port() -> Iterator[int]:
    """A real threaded HTTP server on 127.0.0.1 that echoes credentials back."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


async def _both_calls(model: OpenAICompatibleModel) -> list[BaseException]:
    errors: list[BaseException] = []
    try:
        async for _ in model.generate(generation()):
            pass
    except ModelHTTPError as error:
        errors.append(error)
    try:
        await model.gate(GATE_INPUT)
    except ModelHTTPError as error:
        errors.append(error)
    return errors


@_SETTINGS
@given(key=header_keys, query_key=passwords, failing=st.booleans())
def test_the_model_adapter_never_shows_a_key(
    key: str,
    query_key: str,
    failing: bool,
    echo_port: int,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    debug_logs.clear()
    path = "/fail/v1" if failing else "/v1"
    url = f"http://127.0.0.1:{echo_port}{path}?api_key={quote(query_key, safe='')}"

    async def run() -> tuple[str, list[BaseException]]:
        async with OpenAICompatibleModel(url, "m", key, gate="model", timeout=5.0) as model:
            return repr(model) + model.base_url, await _both_calls(model)

    shown, errors = asyncio.run(run())
    assert len(errors) == 2
    texts = [shown, logged(debug_logs), *(everything(error) for error in errors)]
    assert_hidden(key, *texts)
    assert_hidden(query_key, *texts)


@_SETTINGS
@given(password=passwords)
def test_a_model_url_with_user_info_is_refused_unquoted(password: str) -> None:
    for url in (
        f"http://alice:{password}@127.0.0.1:1/v1",
        f"http://{password}@127.0.0.1:1/v1",
        f"https://alice:{quote(password, safe='')}@example.invalid/v1",
    ):
        with pytest.raises(AffectMemoryError) as caught:
            OpenAICompatibleModel(url, "m")
        assert_hidden(password, everything(caught.value))


# -- the command line: fewer credentials, each a subprocess ------------------------------------


def _cli(*argv: str, env: dict[str, str], stdin: str = "") -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-m", "affect_memory", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    return result.returncode, result.stdout + result.stderr


def _sampled(count: int, seed: int) -> list[str]:
    """``count`` passwords from a seeded generator, each with / @ : % ? and non-ASCII."""
    chooser = random.Random(seed)
    return [
        "pw"
        + "".join(chooser.choice(_PLAIN + _SPECIAL * 3 + _FOREIGN) for _ in range(12))
        + chooser.choice(_SPECIAL)
        + chooser.choice(_FOREIGN)
        + "zz"
        for _ in range(count)
    ]


def test_the_cli_never_shows_a_store_password(tmp_path: Path) -> None:
    env = {"AFFECT_MEMORY_HOME": str(tmp_path), "AFFECT_MEMORY_STATE": ""}
    for password in _sampled(3, seed=23):
        urls = postgres_urls(password)
        for argv in (
            ("recall", "q", "--user-id", "u", "--index", urls[0]),
            ("recall", "q", "--user-id", "u", "--index", urls[2]),
            ("recall", "q", "--user-id", "u", "--chroma", f"http://a:{password}@127.0.0.1:1/x"),
            ("chat", "--model-url", "http://127.0.0.1:1/v1", "--model", "m", "--state", urls[0]),
            ("chat", "--model-url", "http://127.0.0.1:1/v1", "--model", "m", "--state", urls[3]),
        ):
            status, output = _cli(*argv, "--data-dir", str(tmp_path), env=env)
            assert status != 0, output
            assert_hidden(password, output)


def test_chat_never_shows_a_key(tmp_path: Path, echo_port: int) -> None:
    env = {"AFFECT_MEMORY_HOME": str(tmp_path), "AFFECT_MEMORY_STATE": ""}
    for key in _sampled(2, seed=4):
        ascii_key = "sk-" + "".join(c for c in key if c.isascii())
        status, output = _cli(
            "chat",
            "--model-url",
            f"http://a:{key}@127.0.0.1:{echo_port}/v1",
            "--model",
            "m",
            "--data-dir",
            str(tmp_path),
            env=env,
        )
        assert status == 2, output
        assert_hidden(key, output)
        status, output = _cli(
            "chat",
            "--model-url",
            "http://127.0.0.1:1/v1",
            "--model",
            "m",
            "--api-key-env",
            ascii_key,
            "--data-dir",
            str(tmp_path),
            env=env,
        )
        assert status == 2, output
        assert "not a valid variable name" in output
        assert_hidden(ascii_key, output)
        status, output = _cli(
            "chat",
            "--model-url",
            f"http://127.0.0.1:{echo_port}/v1?key={quote(key, safe='')}",
            "--model",
            "m",
            "--data-dir",
            str(tmp_path),
            env={**env, "OPENAI_API_KEY": ascii_key},
            stdin="hello\n",
        )
        assert_hidden(ascii_key, output)
        assert_hidden(key, output)
