"""Malformed input never kills ``affect-memory mcp`` nor goes unanswered (issue 23, item 5).

One real server over stdio takes every case as raw bytes on stdin. After each case a ``ping``
sentinel follows; the lines before its reply are the case's replies, read under a deadline
each, so a missing reply, a second reply or a dead server fails the case it belongs to without
ever waiting forever or sleeping. What each case must get:

- a JSON-RPC error (``"error"``) for anything that is not a sound request: bytes that are not
  UTF-8 or not JSON (-32700), nesting or numbers past the bounds, non-objects and bad envelopes
  (-32600), unknown methods (-32601) and unknown tools (-32602, the MCP specification lists
  "unknown tools" among protocol errors). Its id is the request's when it can be read, else null.
- a tool error result (``isError: true``) for a known tool with bad arguments: since the
  2025-11-25 specification (SEP-1303) input validation errors are tool execution errors, so a
  model can read them and retry; a repeated key inside a call is one too (the existing screen).
- nothing for a well-formed notification: JSON-RPC 2.0 forbids replying to one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.plugin.integrations.mcp_process import McpProcess

START_TIMEOUT = 240.0
"""Seconds the server may take to start: loading the model is slow on a busy machine."""
REPLY_TIMEOUT = 30.0
"""Seconds any one reply may take."""

Case = tuple[str, bytes, str, Any]
"""(name, raw line, expected kind: "error", "tool_error" or "none", expected id)."""


class Stdio(McpProcess):
    """One ``affect-memory mcp`` process; raw lines in, reply lines out under a deadline."""

    def replies_before(self, sentinel: str) -> list[dict[str, Any]]:
        """Send a ``ping`` with id ``sentinel``; every reply that came before its answer."""
        self.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode())
        seen: list[dict[str, Any]] = []
        while True:
            reply = self.line(REPLY_TIMEOUT)
            if reply.get("id") == sentinel and "result" in reply:
                return seen
            seen.append(reply)


def _call(ident: Any, name: str, arguments: str) -> bytes:
    return (
        f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "method": "tools/call", '
        f'"params": {{"name": "{name}", "arguments": {arguments}}}}}'
    ).encode()


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


WRONG_VALUES: dict[str, list[Any]] = {
    "string": [1, 1.5, True, None, [], {}, ["x"]],
    "integer": ["1", 1.5, True, None, [], {}],
    "number": ["0.5", True, None, [], {}],
    "boolean": ["true", 1, 0, None, []],
    "array": ["x", 1, {}, None, True],
    "object": ["x", 1, [], True],
}
"""Values of the wrong JSON type for each schema type."""


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property schema allows (``anyOf`` flattened)."""
    options = schema.get("anyOf", [schema])
    return {option["type"] for option in options if "type" in option}


def _wrong_type_cases(tools: list[dict[str, Any]]) -> list[Case]:
    """A call per tool, argument and wrong value, every other required argument sound."""
    sound = {"string": "hello", "integer": 1, "number": 0.5, "boolean": True, "array": ["x"]}
    cases: list[Case] = []
    for tool in tools:
        schema = tool["inputSchema"]
        properties: dict[str, Any] = schema.get("properties", {})
        base = {
            name: sound.get(sorted(_kinds(properties[name]) - {"null"})[0], "x")
            for name in schema.get("required", [])
        }
        for name, prop in properties.items():
            allowed = _kinds(prop)
            for kind in sorted(allowed - {"null"}):
                for value in WRONG_VALUES[kind]:
                    if value is None and "null" in allowed:
                        continue
                    if any(_is(value, k) for k in allowed):
                        continue
                    ident = f"type-{tool['name']}-{name}-{len(cases)}"
                    arguments = json.dumps({**base, name: value})
                    label = f"{tool['name']}.{name}={value!r}"
                    cases.append(
                        (label, _call(ident, tool["name"], arguments), "tool_error", ident)
                    )
    return cases


def _is(value: Any, kind: str) -> bool:
    """Whether ``value`` is a sound JSON value of ``kind`` (a bool is only a boolean)."""
    if isinstance(value, bool) or value is None:
        return kind == ("boolean" if isinstance(value, bool) else "null")
    checks: dict[str, Any] = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "array": list,
        "object": dict,
    }
    return kind in checks and isinstance(value, checks[kind])


def _static_cases() -> list[Case]:
    cases: list[Case] = []
    recall = '{"query": "q", "user_id": "u", "where": %s}'
    for depth in (65, 100, 199, 200, 300, 500, 800, 999, 1000, 1500, 5000):
        ident = f"deep-{depth}"
        cases.append(
            (f"deep where {depth}", _call(ident, "recall", recall % _nest(depth)), "error", ident)
        )
        line = b'{"jsonrpc": "2.0", "id": 7%d, "method": "ping", "params": {"x": %s}}' % (
            depth,
            _nest(depth).encode(),
        )
        cases.append((f"deep params {depth}", line, "error", int(f"7{depth}")))
        cases.append((f"deep bare {depth}", _nest(depth).encode(), "error", None))
    for digits in (101, 500, 4300, 4301, 5000, 20000):
        ident = f"digits-{digits}"
        top_k = '{"query": "q", "user_id": "u", "top_k": %s}' % ("9" * digits)
        cases.append((f"int {digits}", _call(ident, "recall", top_k), "error", ident))
        float_arg = '{"text": "t", "user_id": "u", "significance": 0.%s}' % ("5" * digits)
        cases.append(
            (f"float {digits}", _call(ident + "f", "remember", float_arg), "error", ident + "f")
        )
        cases.append(
            (
                f"id {digits}",
                b'{"jsonrpc": "2.0", "id": %s, "method": "ping"}' % (b"1" * digits),
                "error",
                None,
            )
        )
    big = '{"query": "q", "user_id": "u", "top_k": %s}'
    for number in ("1" * 60, "-" + "1" * 60, "1e400", "-1e400", "1.5"):
        cases.append(
            (
                f"top_k {number[:8]}",
                _call(f"n-{number[:8]}", "recall", big % number),
                "tool_error",
                f"n-{number[:8]}",
            )
        )
    for key in ("user_id", "text"):
        arguments = f'{{"text": "t", "user_id": "u", "{key}": "again"}}'
        cases.append(
            (f"dup {key}", _call(f"dup-{key}", "remember", arguments), "tool_error", f"dup-{key}")
        )
    cases.append(("dup id", b'{"jsonrpc": "2.0", "id": 5, "id": 6, "method": "ping"}', "error", 6))
    cases.append(
        (
            "dup method",
            b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "method": "tools/list"}',
            "error",
            8,
        )
    )
    cases.append(
        (
            "dup params",
            b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}, "params": {}}',
            "error",
            9,
        )
    )
    for index, bad in enumerate(
        (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")
    ):
        ident = f"utf8-{index}"
        cases.append(
            (
                f"utf8 {bad!r}",
                _call(ident, "remember", '{"text": "a@", "user_id": "u"}').replace(b"@", bad),
                "error",
                ident,
            )
        )
        cases.append((f"utf8 bare {bad!r}", bad, "error", None))
    for name in ("nope", "Recall", "recall ", "", "tools/list", "remember\u0000"):
        ident = f"tool-{len(cases)}"
        line = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "method": "tools/call",
                "params": {"name": name, "arguments": {}},
            }
        )
        cases.append((f"unknown tool {name!r}", line.encode(), "error", ident))
    for method in ("nope", "tools/lis", "TOOLS/LIST", "resources/nope", "", "rpc.discover"):
        ident = f"method-{len(cases)}"
        cases.append(
            (
                f"unknown method {method!r}",
                json.dumps({"jsonrpc": "2.0", "id": ident, "method": method}).encode(),
                "error",
                ident,
            )
        )
    missing_ids = (
        b'{"method": "tools/list"}',
        b'{"jsonrpc": "1.0", "method": "tools/list"}',
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "params": {}}',
        b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": [], "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": {}, "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "method": 7}',
    )
    for line in missing_ids:
        cases.append((f"missing id {line[:40]!r}", line, "error", None))
    notifications = (
        b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "recall"}}',
        b'{"jsonrpc": "2.0", "method": "notifications/nope"}',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
    )
    for line in notifications:
        cases.append((f"notification {line[:40]!r}", line, "none", None))
    envelopes = (
        (b'{"jsonrpc": "2.0", "id": 11, "method": "tools/list", "params": []}', 11),
        (b'{"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": "x"}', 12),
        (b'{"jsonrpc": 2, "id": 13, "method": "ping"}', 13),
        (b'{"jsonrpc": "2.0", "id": 14}', 14),
        (b'{"jsonrpc": "2.0", "id": 15, "method": ["ping"]}', 15),
    )
    for line, ident in envelopes:
        cases.append((f"envelope {line[:40]!r}", line, "error", ident))
    for value in (
        b"1",
        b'"x"',
        b"null",
        b"true",
        b"[]",
        b"[1]",
        b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
        b"{}",
        b"1e999",
        b"NaN",
    ):
        cases.append((f"non-object {value!r}", value, "error", None))
    sound = _call("t", "recall", '{"query": "hello", "user_id": "u"}')
    for cut in (1, 2, 10, 20, 30, 45, 60, 80, len(sound) - 2, len(sound) - 1):
        cases.append(
            (
                f"truncated at {cut}",
                sound[:cut],
                "error",
                "t" if b'"id": "t"' in sound[:cut] else None,
            )
        )
    for junk in (b"{", b"}", b"{]", b"{'a': 1}", b"not json", b"\x00", b'{"a" 1}', b"[,]"):
        cases.append((f"junk {junk!r}", junk, "error", None))
    return cases


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stdio]:
    """One server for every case, initialized once."""
    running = Stdio(tmp_path_factory.mktemp("mcp-fuzz"))
    try:
        running.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "0"},
                    },
                }
            ).encode()
        )
        hello = running.line(START_TIMEOUT)
        assert hello.get("id") == "init" and "result" in hello, hello
        running.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield running
    finally:
        running.close()


def _check(reply: list[dict[str, Any]], name: str, kind: str, ident: Any) -> str | None:
    """Why ``reply`` is not what case ``name`` expects, or None."""
    if kind == "none":
        return None if reply == [] else f"{name}: a notification was answered: {reply}"
    if len(reply) != 1:
        return f"{name}: expected one reply, got {len(reply)}: {str(reply)[:300]}"
    [message] = reply
    if message.get("jsonrpc") != "2.0" or message.get("id") != ident:
        return f"{name}: expected id {ident!r}: {str(message)[:300]}"
    if kind == "error":
        error = message.get("error")
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            return f"{name}: expected a JSON-RPC error: {str(message)[:300]}"
        if not isinstance(error.get("message"), str) or "\n" in error["message"]:
            return f"{name}: the error message is not one line: {str(message)[:300]}"
        return None
    result = message.get("result")
    if not isinstance(result, dict) or result.get("isError") is not True:
        return f"{name}: expected a tool error result: {str(message)[:300]}"
    [content] = result["content"]
    if "\n" in content["text"]:
        return f"{name}: the tool error is not one line: {content['text'][:300]}"
    return None


def test_every_malformed_request_gets_one_error_reply_and_the_server_keeps_serving(
    server: Stdio,
) -> None:
    server.send(b'{"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}')
    listing = server.line(REPLY_TIMEOUT)
    tools = listing["result"]["tools"]
    cases = _static_cases() + _wrong_type_cases(tools)
    assert len(cases) >= 200, len(cases)
    failures: list[str] = []
    for number, (name, line, kind, ident) in enumerate(cases):
        server.send(line)
        failure = _check(server.replies_before(f"sentinel-{number}"), name, kind, ident)
        if failure is not None:
            failures.append(failure)
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)
    server.send(_call("after", "recall", '{"query": "hello", "user_id": "u"}'))
    after = server.line(REPLY_TIMEOUT)
    assert after["id"] == "after" and after["result"].get("isError") is not True, after
    assert server.process.poll() is None, "the server is still running"


@pytest.mark.parametrize(
    ("body", "ident"),
    [
        (b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": ' + b"[" * 1000, 3),
        (b'{"jsonrpc": "2.0", "id": 4, "params": {"x": ' + _nest(500).encode() + b"}}", 4),
        (
            b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"n": ' + b"1" * 5000 + b"}}",
            5,
        ),
        (b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"s": "\xff"}}', 6),
    ],
)
async def test_http_answers_a_rejected_body_400_with_a_json_rpc_error(
    body: bytes, ident: int
) -> None:
    from affect_memory.integrations.mcp_http import ScreenedBodies

    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a rejected body never reaches the SDK")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "headers": []}
    await ScreenedBodies(app)(scope, receive, send)
    assert sent[0]["status"] == 400
    reply = json.loads(sent[1]["body"])
    assert reply["id"] == ident and isinstance(reply["error"]["code"], int), reply
