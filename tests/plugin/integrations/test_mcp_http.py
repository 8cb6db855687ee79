"""``affect-memory mcp --http`` end to end: a server process on a free loopback port, the SDK's
streamable-HTTP client, and the bearer token's guard; plus the body screen as an ASGI layer.

The server binds port 0 and prints the address it got once it is ready (model loaded), so the
fixture waits for that line under a deadline instead of sleeping.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from affect_memory.integrations.mcp_http import (
    MCP_PATH,
    TOKEN_ENV,
    ScreenedBodies,
    check_http_settings,
)
from affect_memory.integrations.mcp_screen import REFUSAL_KEY
from affect_memory.kernel import __version__
from affect_memory.kernel.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "t0ken-that-must-never-be-logged"
START_TIMEOUT = 240.0
"""Seconds the server may take to start: loading the model is slow on a busy machine."""


def _env(**extra: str) -> dict[str, str]:
    env = {
        key: os.environ[key]
        for key in ("PATH", "PYTHONPATH", "HF_HOME", "TMPDIR", "VIRTUAL_ENV", "AFFECT_MEMORY_CACHE")
        if key in os.environ
    }
    env.update(HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False", **extra)
    return env


SERVE = (sys.executable, "-m", "affect_memory.cli", "mcp", "--http", "--port", "0")
"""The server's command: over HTTP, on a port the system picks (it prints which)."""


class Server:
    """One ``affect-memory mcp --http`` process and the URL it serves."""

    def __init__(self, data_dir: Path) -> None:
        self.log = data_dir / "server-stderr.log"
        self._stderr = self.log.open("wb")
        self.process = subprocess.Popen(
            [*SERVE, "--data-dir", str(data_dir), "--log-level", "INFO"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env=_env(**{TOKEN_ENV: TOKEN}),
            cwd=str(ROOT),
        )
        self.url = self._wait_for_address()

    def _wait_for_address(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith("affect-memory mcp: serving "):
                    return line.split()[3]
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text(errors='replace')}")
            time.sleep(0.1)  # polling the log under the deadline, not ordering by sleep
        raise TimeoutError(f"the MCP server did not start within {START_TIMEOUT:.0f} s")

    def stop(self) -> None:
        """Stop the server by its pid and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self._stderr.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One guarded HTTP server for the module."""
    running = Server(tmp_path_factory.mktemp("mcp-http"))
    try:
        yield running
    finally:
        running.stop()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


async def test_the_sdk_client_lists_tools_and_recalls_over_http(server: Server) -> None:
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith(MCP_PATH)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
        assert initialized.server_info.name == "affect-memory"
        assert initialized.server_info.version == __version__
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert {"remember", "recall", "forget", "appraise", "presence"} <= tools
        stored = await session.call_tool(
            "remember",
            {
                "text": "I adopted a grey cat called Miso",
                "user_id": "alice",
                "timestamp": "2026-05-01T09:30:00Z",
            },
        )
        assert not stored.is_error, stored.content
        recalled = await session.call_tool("recall", {"query": "my cat", "user_id": "alice"})
        assert not recalled.is_error, recalled.content
        assert recalled.structured_content is not None
        [hit] = recalled.structured_content["results"]
        assert hit["text"] == "I adopted a grey cat called Miso"
        repeated = await session.call_tool(
            "recall", {"query": "my cat", "user_id": "alice", "top_k": 1}
        )
        assert not repeated.is_error


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", f"bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN]
)
def test_a_request_without_the_right_token_gets_401(
    server: Server, authorization: str | None
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    status, body = _post(server.url, json.dumps(initialize).encode(), headers)
    assert status == 401
    assert TOKEN not in body
    assert TOKEN not in server.log.read_text(errors="replace"), "the token is never logged"


def test_a_non_loopback_host_without_a_token_exits_2(tmp_path: Path) -> None:
    env = _env()
    env.pop(TOKEN_ENV, None)
    command = [sys.executable, "-m", "affect_memory.cli", "mcp", "--http", "--host", "0.0.0.0"]
    result = subprocess.run(
        [*command, "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("affect-memory mcp: --host '0.0.0.0' is not loopback")
    assert TOKEN_ENV in line


def test_http_options_need_http_and_a_bad_token_is_not_echoed(tmp_path: Path) -> None:
    for extra, expected in (
        (["--port", "9"], "affect-memory mcp: --port needs --http"),
        (["--http", "--token", "has space"], "bearer token (--token or"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "affect_memory.cli", "mcp", "--data-dir", str(tmp_path), *extra],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=str(ROOT),
            timeout=120,
        )
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr and "has space" not in result.stderr


def test_the_mcp_server_refuses_a_public_host_without_its_token() -> None:
    """The rules are ``affect_memory.exposure``'s (tested there, host by host); the MCP
    server's own part is its variable, named in the refusal."""
    assert check_http_settings("127.0.0.1", 0, None) is None
    with pytest.raises(InvalidInputError, match=rf"is not loopback.*\${TOKEN_ENV}"):
        check_http_settings("0.0.0.0", 0, None)
    assert check_http_settings("0.0.0.0", 8765, "s3cret") == "s3cret"


class _Recorder:
    """A downstream ASGI app that records the scope and the body it was handed."""

    def __init__(self) -> None:
        self.body = b""
        self.headers: dict[bytes, bytes] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.headers = dict(scope["headers"])
        while True:
            message = await receive()
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                break


async def _screen(body: bytes, chunk: int = 7) -> _Recorder:
    recorder = _Recorder()
    parts = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
    messages = [
        {"type": "http.request", "body": part, "more_body": index < len(parts) - 1}
        for index, part in enumerate(parts)
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: Any) -> None:
        raise AssertionError("the screen never answers itself")

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-length", str(len(body)).encode())],
    }
    await ScreenedBodies(recorder)(scope, receive, send)
    return recorder


async def test_http_bodies_are_screened_as_stdin_lines_are() -> None:
    fine = (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall",'
        b'"arguments":{"query":"q","user_id":"a"}}}'
    )
    assert (await _screen(fine)).body == fine, "a sound message passes unchanged"
    twice = (
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"recall",'
        b'"arguments":{"query":"q","user_id":"a","user_id":"b"}}}'
    )
    screened = await _screen(twice)
    message = json.loads(screened.body)
    assert message["id"] == 4 and message["params"]["name"] == "recall"
    assert "repeats the key 'user_id'" in message["params"]["arguments"][REFUSAL_KEY]
    assert screened.headers[b"content-length"] == str(len(screened.body)).encode()
