"""The stdin screen: faults the SDK's parser would resolve wrongly, or drop, are answered.

Python's parser sees what the SDK's cannot: a repeated JSON key (the SDK keeps the last, so
``user_id`` twice resolves last-wins) and a lone surrogate (the SDK drops the line without
replying). A ``tools/call`` holding either is rewritten to carry only the refusal, under an
argument name no client can know, so it comes back as that tool's error.

Every other message the SDK would drop without a reply (or die on) becomes a ``Rejection``, a
JSON-RPC error the transport sends instead: bytes that are not UTF-8 or not JSON (-32700),
nesting deeper than ``MAX_JSON_DEPTH`` or a number longer than ``MAX_NUMBER_DIGITS`` (the SDK
drops the first past 200 levels, and Python's parser raises ``RecursionError`` near 1,000),
and JSON that is not a JSON-RPC message (-32600). The error carries the request's id when it
can be read (so the client's pending call resolves), else null, as JSON-RPC 2.0 says.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from mcp_types import jsonrpc_message_adapter

from affect_memory.integrations.mcp_arguments import lone_surrogate
from affect_memory.jsonl import DuplicateKeyError, JsonBoundsError, loads_strict
from affect_memory.kernel.errors import shown

__all__ = [
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "REFUSAL_KEY",
    "Rejection",
    "recover_id",
    "screen_message",
]

PARSE_ERROR = -32700
"""JSON-RPC 2.0's code for a message that is not JSON (here also: not UTF-8)."""

INVALID_REQUEST = -32600
"""JSON-RPC 2.0's code for JSON that is not a valid request (here also: beyond the bounds)."""

REFUSAL_KEY = f"\x00refused-{secrets.token_hex(8)}"
"""An argument name no client can know: the stdin screen files a request's fault under it."""


@dataclass(frozen=True)
class Rejection:
    """A JSON-RPC error the transport answers with instead of handing the message on."""

    ident: int | str | None
    code: int
    message: str

    def to_json(self) -> dict[str, Any]:
        """The error response as a JSON-RPC 2.0 object."""
        error = {"code": self.code, "message": self.message}
        return {"jsonrpc": "2.0", "id": self.ident, "error": error}

    def to_line(self) -> str:
        """The error response as one line of JSON (no newline)."""
        return json.dumps(self.to_json())


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")


def _valid_id(value: object) -> int | str | None:
    """``value`` when JSON-RPC allows it as an id (an integer or a string we can echo)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and lone_surrogate(value) is None:
        return value
    return None


def recover_id(text: str) -> int | str | None:
    """The top-level ``"id"`` of a message that could not be parsed whole, else None.

    A token scan, no recursion: it reads only depth-1 keys, so an ``"id"`` inside ``params``
    is never taken for the request's. The last of repeated ids wins, as the SDK reads them.
    """
    found: int | str | None = None
    depth = 0
    key: str | None = None
    tokens = [match.group() for match in _TOKEN.finditer(text)]
    for index, token in enumerate(tokens):
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
        elif depth == 1 and token.startswith('"') and tokens[index + 1 : index + 2] == [":"]:
            key = token
        elif depth == 1 and key == '"id"' and token != ":":
            key = None
            if token.startswith('"') and len(token) > 1 and token.endswith('"'):
                try:
                    found = _valid_id(json.loads(token))
                except ValueError:
                    found = None
            elif _INTEGER.fullmatch(token):
                found = int(token)
            else:
                found = None
    return found


def _first_surrogate(value: Any, path: str) -> str | None:
    """The path of the first key or string under ``value`` with a lone surrogate."""
    if isinstance(value, str):
        return path if lone_surrogate(value) is not None else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if lone_surrogate(key) is not None:
                return f"{path or 'the request'} (a key)"
            found = _first_surrogate(item, where)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_surrogate(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def screen_message(raw: str | bytes) -> str | Rejection:
    """The message to hand the SDK (``raw`` itself, or for a ``tools/call`` the SDK could not
    read faithfully a rewrite whose arguments carry only the refusal), or the ``Rejection``
    to answer with instead. A blank line passes as it is (the stdio reader skips it)."""
    if isinstance(raw, bytes):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            ident = recover_id(raw.decode("utf-8", errors="replace"))
            return Rejection(
                ident, PARSE_ERROR, f"parse error: byte {error.start} is not UTF-8 text"
            )
    else:
        line = raw
    if not line.strip():
        return line
    try:
        message = loads_strict(line, non_finite=True)  # NaN: the tool names the field
    except DuplicateKeyError as error:
        key = shown(error.key)
        return _refusal(line, f"the request repeats the key {key}; JSON keys must be unique")
    except JsonBoundsError as error:
        return Rejection(recover_id(line), INVALID_REQUEST, f"invalid request: {error}")
    except ValueError as error:
        return Rejection(recover_id(line), PARSE_ERROR, f"parse error: {_one_line(error)}")
    params = message.get("params") if isinstance(message, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    found = _first_surrogate(arguments, "") if isinstance(arguments, dict) else None
    found = found or _first_surrogate(message, "")
    if found is not None:
        return _refusal(line, f"{found} has a lone surrogate, which is not Unicode text")
    ident = _valid_id(message.get("id")) if isinstance(message, dict) else None
    if isinstance(message, dict) and "id" in message and ident is None:
        # the SDK would read ``true`` as 1, or drop the message
        return Rejection(None, INVALID_REQUEST, f"invalid request: {_envelope_fault(message)}")
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError is a ValueError
        return Rejection(ident, INVALID_REQUEST, f"invalid request: {_envelope_fault(message)}")
    return line


def _one_line(error: Exception) -> str:
    """``error``'s message on one line, cut to 200 characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _envelope_fault(message: Any) -> str:
    """Why ``message`` is not a JSON-RPC 2.0 message, in a few words."""
    if not isinstance(message, dict):
        kind = (
            "an array (batches are not supported)"
            if isinstance(message, list)
            else f"a JSON {type(message).__name__}"
        )
        return f"a message must be a JSON-RPC object, got {kind}"
    if "jsonrpc" not in message:
        return 'the member "jsonrpc": "2.0" is missing'
    if message.get("jsonrpc") != "2.0":
        return f'"jsonrpc" must be "2.0", got {shown(message.get("jsonrpc"))}'
    if "id" in message and _valid_id(message["id"]) is None:
        return f'"id" must be an integer or a string, got {shown(message["id"])}'
    if "method" in message and not isinstance(message["method"], str):
        return f'"method" must be a string, got {shown(message["method"])}'
    if "params" in message and not isinstance(message["params"], dict):
        return f'"params" must be an object, got {shown(message["params"])}'
    return "not a JSON-RPC 2.0 request, notification or response"


def _refusal(line: str, fault: str) -> str | Rejection:
    """A ``tools/call`` with the same id and tool whose only argument is ``fault``; for any
    other message (or a call without an id to answer) the ``Rejection`` of ``fault``."""
    # last-wins, as the SDK would have read it; the bounds held when the screen parsed it
    try:
        message = loads_strict(line, non_finite=True, unique_keys=False)
    except ValueError as error:  # nested too deep or a number too long, besides the repeat
        return Rejection(recover_id(line), INVALID_REQUEST, f"invalid request: {error}")
    ident = _valid_id(message.get("id")) if isinstance(message, dict) else None
    if not isinstance(message, dict) or message.get("method") != "tools/call" or ident is None:
        return Rejection(ident, INVALID_REQUEST, f"invalid request: {fault}")
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if not isinstance(name, str) or lone_surrogate(name) is not None:
        name = "tools/call"
    rewritten = {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": name, "arguments": {REFUSAL_KEY: fault}},
    }
    return json.dumps(rewritten) + "\n"
