"""The stdin screen: faults the SDK's parser would resolve wrongly, or drop, become tool errors.

Python's parser sees what the SDK's cannot: a repeated JSON key (the SDK keeps the last, so
``user_id`` twice resolves last-wins) and a lone surrogate (the SDK drops the line without
replying). A ``tools/call`` holding either is rewritten to carry only the refusal, under an
argument name no client can know; other messages pass unchanged.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from affect_memory.integrations.mcp_arguments import lone_surrogate
from affect_memory.kernel.errors import shown

__all__ = ["REFUSAL_KEY", "screen_line"]

REFUSAL_KEY = f"\x00refused-{secrets.token_hex(8)}"
"""An argument name no client can know: the stdin screen files a request's fault under it."""


class _DuplicateKeyError(ValueError):
    """A JSON object repeats a key."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


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


def screen_line(line: str) -> str:
    """``line`` itself, or for a ``tools/call`` the SDK could not read faithfully a rewrite
    whose arguments carry only the refusal.

    Python's parser sees what the SDK's cannot: a repeated key (the SDK keeps the last) and a
    lone surrogate (the SDK drops the line without replying). Other messages pass unchanged.
    """
    try:
        message = json.loads(line, object_pairs_hook=_unique)
    except _DuplicateKeyError as error:
        key = shown(error.args[0])
        return _refusal(line, f"the request repeats the key {key}; JSON keys must be unique")
    except ValueError:
        return line  # not JSON: the SDK reports it as before
    params = message.get("params") if isinstance(message, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    found = _first_surrogate(arguments, "") if isinstance(arguments, dict) else None
    found = found or _first_surrogate(message, "")
    if found is None:
        return line
    return _refusal(line, f"{found} has a lone surrogate, which is not Unicode text")


def _refusal(line: str, fault: str) -> str:
    """A ``tools/call`` with the same id and tool whose only argument is ``fault``."""
    message = json.loads(line)  # last-wins, as the SDK would have read it
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return line
    ident = message.get("id")
    if (
        isinstance(ident, bool)
        or not isinstance(ident, int | str)
        or (isinstance(ident, str) and lone_surrogate(ident) is not None)
    ):
        return line
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


