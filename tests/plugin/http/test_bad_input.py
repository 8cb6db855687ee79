"""Bad input to the API: each case gets a 4xx problem document whose one-line ``detail`` names
the field and the bad value, and writes nothing (the store's count is the same after).

The cases run against one real server (embedded Chroma, SQLite state). The messages are the
store's own validators' words, so they agree with the CLI's and the Python API's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.plugin.http.conftest import Api

USER = "bad-input"
MEMORIES = f"/v1/users/{USER}/memories"
RECALL = f"/v1/users/{USER}/recall"
GOOD = {"text": "A good memory.", "timestamp": "2025-01-01T10:00:00Z"}


@dataclass(frozen=True)
class Case:
    """One bad request and what its problem must say."""

    name: str
    method: str
    path: str
    status: int
    field: str | None
    fragments: tuple[str, ...] = ()
    """Text the detail must hold besides the field: the bad value as shown, a reason."""
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)


def _record(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def _post(name: str, records: Any, field_name: str, *fragments: str, **extra: Any) -> Case:
    return Case(name, "POST", MEMORIES, 422, field_name, fragments, {"records": records, **extra})


def _recall(name: str, body: dict[str, Any], field_name: str, *fragments: str) -> Case:
    return Case(name, "POST", RECALL, 422, field_name, fragments, body)


def _listing(name: str, params: dict[str, str], field_name: str, *fragments: str) -> Case:
    return Case(name, "GET", MEMORIES, 422, field_name, fragments, params=params)


JSON = {"Content-Type": "application/json"}

CASES = [
    # -- the body as a whole
    Case("malformed JSON", "POST", MEMORIES, 400, "body", ("invalid JSON",),
         raw=b'{"records": [', headers=JSON),
    Case("wrong content type", "POST", MEMORIES, 415, "Content-Type", ("'text/plain'",),
         raw=b'{"records": []}', headers={"Content-Type": "text/plain"}),
    Case("no content type", "POST", MEMORIES, 415, "Content-Type", ("none",), raw=b"{}"),
    Case("body too large", "POST", MEMORIES, 413, "body", ("8,388,608",),
         raw=b" " * (8 * 1024 * 1024 + 1), headers=JSON),
    Case("empty body", "POST", MEMORIES, 400, "body", ("empty",), raw=b"", headers=JSON),
    Case("body not an object", "POST", MEMORIES, 422, "body", ("[1, 2]",), body=[1, 2]),
    Case("repeated key", "POST", MEMORIES, 400, "body", ("'records' appears twice",),
         raw=b'{"records": [], "records": [{"text": "x"}]}', headers=JSON),
    Case("not UTF-8", "POST", MEMORIES, 400, "body", ("UTF-8", "0xff"),
         raw=b'{"records": ["\xff"]}', headers=JSON),
    Case("unknown top-level field", "POST", MEMORIES, 422, "mode", ("'replace'",),
         {"records": [GOOD], "mode": "replace"}),
    Case("records missing", "POST", MEMORIES, 422, "records", ("required",), {"upsert": True}),
    _post("upsert not a bool", [GOOD], "upsert", "'yes'", upsert="yes"),
    # -- the records
    _post("records not a list", {"text": "x"}, "records", "{'text': 'x'}"),
    _post("records empty", [], "records", "[]"),
    _post("too many records", [GOOD] * 1001, "records", "1,001"),
    _post("record not an object", [5], "records[0]", "got 5"),
    _post("record missing text", [{"timestamp": GOOD["timestamp"]}], "records[0].text",
          "required"),
    _post("text not a string", [_record(text=5)], "records[0].text", "got 5"),
    _post("empty text", [_record(text="")], "records[0].text", "''"),
    _post("blank text", [_record(text="   ")], "records[0].text", "'   '"),
    _post("text too long", [_record(text="x" * 4097)], "records[0].text", "4097 characters"),
    _post("bad timestamp", [_record(timestamp="yesterday")], "records[0].timestamp",
          "'yesterday'"),
    _post("naive timestamp", [_record(timestamp="2025-01-01T10:00:00")],
          "records[0].timestamp", "'2025-01-01T10:00:00'", "UTC offset"),
    _post("timestamp out of range", [_record(timestamp="1900-01-01T00:00:00Z")],
          "records[0].timestamp", "'1900-01-01T00:00:00Z'"),
    _post("significance above 1", [_record(significance=1.5)], "records[0].significance",
          "1.5"),
    _post("significance a string", [_record(significance="high")],
          "records[0].significance", "'high'"),
    _post("significance a bool", [_record(significance=True)], "records[0].significance",
          "True"),
    Case("significance NaN", "POST", MEMORIES, 422, "records[0].significance", ("nan",),
         raw=b'{"records": [{"text": "x", "significance": NaN}]}', headers=JSON),
    _post("valence below -1", [_record(valence=-2)], "records[0].valence", "-2"),
    Case("valence infinite", "POST", MEMORIES, 422, "records[0].valence", ("inf",),
         raw=b'{"records": [{"text": "x", "valence": Infinity}]}', headers=JSON),
    _post("episode not a bool", [_record(episode="yes")], "records[0].episode", "'yes'"),
    _post("duplicate ids", [_record(id="dup"), _record(id="dup")], "records[1].id",
          "'dup'", "records[0].id"),
    _post("id too long", [_record(id="i" * 513)], "records[0].id", "513 characters"),
    _post("id with NUL", [_record(id="a\x00b")], "records[0].id", "NUL"),
    _post("id empty", [_record(id="")], "records[0].id", "''"),
    _post("id not a string", [_record(id=7)], "records[0].id", "got 7"),
    _post("metadata not an object", [_record(metadata=[1])], "records[0].metadata", "[1]"),
    _post("metadata value a list", [_record(metadata={"k": [1]})], "records[0].metadata",
          "'k'", "[1]"),
    _post("metadata value null", [_record(metadata={"k": None})], "records[0].metadata",
          "'k'", "None"),
    _post("metadata reserved key", [_record(metadata={"user_id": "x"})],
          "records[0].metadata", "'user_id'", "reserved"),
    _post("metadata operator key", [_record(metadata={"$and": 1})], "records[0].metadata",
          "'$and'"),
    _post("unknown record field", [_record(user_id="someone-else")], "records[0].user_id",
          "'someone-else'"),
    _post("one bad record of two", [GOOD, _record(timestamp="soon")], "records[1].timestamp",
          "'soon'"),
    # -- path segments
    Case("user id too long", "GET", f"/v1/users/{'u' * 513}/memories", 422, "user_id",
         ("513 characters",)),
    Case("user id with NUL", "GET", "/v1/users/a%00b/memories", 422, "user_id", ("NUL",)),
    Case("unknown memory id", "GET", f"{MEMORIES}/no-such-id", 404, "memory_id",
         ("'no-such-id'",)),
    Case("forget an unknown memory", "DELETE", f"{MEMORIES}/no-such-id", 404, "memory_id",
         ("'no-such-id'",)),
    # -- recall
    _recall("query missing", {"top_k": 3}, "query", "required"),
    _recall("query empty", {"query": ""}, "query", "''"),
    _recall("query not a string", {"query": 5}, "query", "got 5"),
    _recall("query too long", {"query": "q" * 4097}, "query", "4097 characters"),
    _recall("top_k zero", {"query": "x", "top_k": 0}, "top_k", "got 0"),
    _recall("top_k negative", {"query": "x", "top_k": -3}, "top_k", "got -3"),
    _recall("top_k huge", {"query": "x", "top_k": 10**6}, "top_k", "1000000"),
    _recall("top_k a float", {"query": "x", "top_k": 2.5}, "top_k", "2.5"),
    _recall("top_k a string", {"query": "x", "top_k": "6"}, "top_k", "'6'"),
    _recall("now naive", {"query": "x", "now": "2025-06-01T12:00:00"}, "now",
            "'2025-06-01T12:00:00'"),
    _recall("now garbage", {"query": "x", "now": "soon"}, "now", "'soon'"),
    _recall("now a number", {"query": "x", "now": 5}, "now", "got 5"),
    _recall("mood_valence out of range", {"query": "x", "mood_valence": 2}, "mood_valence",
            "got 2"),
    _recall("mood_valence a string", {"query": "x", "mood_valence": "happy"}, "mood_valence",
            "'happy'"),
    _recall("where bad operator", {"query": "x", "where": {"agent_id": {"$gt": "a"}}},
            "where", "'$gt'"),
    _recall("where not an object", {"query": "x", "where": "agent_id"}, "where",
            "'agent_id'"),
    _recall("where unknown field", {"query": "x", "where": {"colour": "red"}}, "where",
            "'colour'"),
    _recall("settings not an object", {"query": "x", "settings": [1]}, "settings", "[1]"),
    _recall("settings unknown key", {"query": "x", "settings": {"speed": 9}},
            "settings.speed", "9"),
    _recall("settings wrong type", {"query": "x", "settings": {"dense_candidates": "many"}},
            "settings.dense_candidates", "'many'"),
    _recall("settings out of range", {"query": "x", "settings": {"lexical_weight": 2}},
            "settings.lexical_weight", "got 2"),
    _recall("settings weight out of range",
            {"query": "x", "settings": {"weights": {"recency_floor": 5}}},
            "settings.weights.recency_floor", "got 5"),
    _recall("unknown recall field", {"query": "x", "k": 3}, "k", "got 3"),
    # -- listing parameters
    _listing("offset negative", {"offset": "-1"}, "offset", "got -1"),
    _listing("limit zero", {"limit": "0"}, "limit", "got 0"),
    _listing("limit over the maximum", {"limit": "1001"}, "limit", "got 1001"),
    _listing("limit not an integer", {"limit": "ten"}, "limit", "'ten'"),
    _listing("unknown parameter", {"sort": "asc"}, "sort", "'sort'"),
    _listing("search empty", {"q": ""}, "q", "''"),
    # -- routing
    Case("unknown route", "GET", "/v1/nothing-here", 404, None, ("/v1/nothing-here",)),
    Case("wrong method", "PUT", MEMORIES, 405, None, ("PUT", "GET", "POST")),
]


def _count(api: Api) -> int:
    count: int = api.client.get("/v1/stats").json()["count"]
    return count


@pytest.fixture(scope="module")
def api(embedded_api: Api) -> Api:
    """The embedded server, with one memory of ``USER`` already stored."""
    stored = embedded_api.client.post(MEMORIES, json={"records": [{**GOOD, "id": "seed"}]})
    assert stored.status_code == 201, stored.text
    return embedded_api


def test_there_are_at_least_forty_distinct_cases() -> None:
    assert len({case.name for case in CASES}) == len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_a_one_line_problem_and_writes_nothing(api: Api, case: Case) -> None:
    before = _count(api)
    options: dict[str, Any] = {"headers": case.headers, "params": case.params}
    if case.raw is not None:
        options["content"] = case.raw
    elif case.body is not None:
        options["content"] = json.dumps(case.body).encode("utf-8")
        options["headers"] = {**JSON, **case.headers}
    answer = api.client.request(case.method, case.path, **options)
    assert answer.status_code == case.status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == case.status and problem["type"] == "about:blank"
    detail = problem["detail"]
    assert "\n" not in detail and len(detail) <= 2000, detail
    assert "Traceback" not in answer.text
    assert problem.get("field") == case.field
    if case.field is not None:
        assert case.field in detail, detail
    for fragment in case.fragments:
        assert fragment in detail, detail
    assert _count(api) == before
    assert api.client.get(f"{MEMORIES}/seed").json()["text"] == GOOD["text"]
