"""The OpenAPI document: served as checked in, covering every route the app has, and naming
every field the API's checks accept."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.routing import Route

from affect_memory.http.app import create_app
from affect_memory.http.context import ServerContext
from affect_memory.http.memory_records import RECORD_FIELDS
from affect_memory.http.openapi import openapi_document
from affect_memory.http.recall import RECALL_FIELDS
from affect_memory.kernel.bounds import MAX_CONVERSATION_ID_CHARS
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.http.conftest import Api
from tests.plugin.http.serve_process import ROOT, serve_command, serve_env

CHECKED_IN = ROOT / "docs" / "reference" / "openapi.json"
REGENERATE = "affect-memory serve --print-openapi > docs/reference/openapi.json"


def test_the_served_document_is_the_checked_in_one(embedded_api: Api) -> None:
    served = embedded_api.client.get("/openapi.json")
    assert served.status_code == 200
    checked_in = json.loads(CHECKED_IN.read_text("utf-8"))
    assert served.json() == checked_in, f"docs/reference/openapi.json is stale; run {REGENERATE}"


def test_print_openapi_writes_the_checked_in_file_byte_for_byte() -> None:
    printed = subprocess.run(
        serve_command("--print-openapi"), capture_output=True, text=True, env=serve_env(),
        timeout=120, check=True,
    ).stdout
    assert printed == CHECKED_IN.read_text("utf-8"), f"stale checked-in copy; run {REGENERATE}"
    assert json.loads(printed)["openapi"] == "3.1.0"


@pytest.fixture
def app_routes(tmp_path: Path, embedder: Embedder) -> Iterator[set[tuple[str, str]]]:
    """Every (path, method) the app routes, the inspector's included."""
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    context = ServerContext(memory, state_url=str(tmp_path / "state.db"))
    try:
        app = create_app(context, inspector=True)
        found: set[tuple[str, str]] = set()
        for route in app.routes:
            assert isinstance(route, Route), f"an unexpected kind of route: {route!r}"
            path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
            methods = (route.methods or set()) - {"HEAD"}
            found.update((path, method.lower()) for method in methods)
        yield found
    finally:
        context.close()


def test_every_route_is_documented_and_every_documented_route_exists(
    app_routes: set[tuple[str, str]],
) -> None:
    documented = {
        (path, method) for path, item in openapi_document()["paths"].items() for method in item
    }
    assert app_routes == documented


def test_the_documented_request_fields_are_the_accepted_ones() -> None:
    schemas = openapi_document()["components"]["schemas"]
    assert list(schemas["MemoryInput"]["properties"]) == list(RECORD_FIELDS)
    assert list(schemas["RecallRequest"]["properties"]) == list(RECALL_FIELDS)
    assert schemas["MemoryBatch"]["required"] == ["records"]
    problem = schemas["Problem"]
    assert set(problem["properties"]) == {"type", "title", "status", "detail", "field"}


def test_every_error_response_is_a_problem_document() -> None:
    document = openapi_document()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert response == {"$ref": "#/components/responses/Problem"}, (
                        path, method, status,
                    )


def _documented(document: dict[str, object], path: str, method: str, status: int) -> object:
    """The schema the document gives the answer of ``method path`` with ``status``."""
    responses = document["paths"][path][method]["responses"]  # type: ignore[index]
    answer = responses[str(status)]
    if "$ref" in answer:
        name = answer["$ref"].rsplit("/", 1)[-1]
        answer = document["components"]["responses"][name]  # type: ignore[index]
    (content,) = answer["content"].values()
    return {**content["schema"], "components": document["components"]}


def test_every_answer_fits_the_schema_the_document_gives_it(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Real answers, successes and problems, checked against the document's own schemas: a
    field the API sends and the document describes otherwise (a null mood, say) fails here."""
    from jsonschema import Draft202012Validator
    from starlette.testclient import TestClient

    document = openapi_document()
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    context = ServerContext(memory, state_url=str(tmp_path / "state.db"), timeout=60.0)
    seen: list[tuple[str, str, int]] = []

    def check(method: str, path: str, template: str, **kwargs: object) -> object:
        answer = client.request(method.upper(), path, **kwargs)  # type: ignore[arg-type]
        schema = _documented(document, template, method, answer.status_code)
        Draft202012Validator(schema).validate(answer.json())
        seen.append((method, template, answer.status_code))
        return answer.json()

    memories = "/v1/users/{user_id}/memories"
    conversation = "/v1/users/{user_id}/conversations/{conversation_id}"
    record = {"id": "m1", "text": "I keep bees on the roof.", "timestamp": "2026-01-02T09:00:00Z"}
    try:
        with TestClient(create_app(context), raise_server_exceptions=False) as client:
            check("post", "/v1/users/ann/memories", memories, json={"records": [record]})
            check("post", "/v1/users/ann/memories", memories, json={"records": [{"text": 3}]})
            check("get", "/v1/users/ann/memories", memories)
            check("get", "/v1/users/ann/memories/m1", memories + "/{memory_id}")
            check("get", "/v1/users/ann/memories/nope", memories + "/{memory_id}")
            check("post", "/v1/users/ann/recall", "/v1/users/{user_id}/recall",
                  json={"query": "bees", "now": "2026-01-03T09:00:00Z"})  # fmt: skip
            check("get", "/v1/users", "/v1/users")
            check("get", "/v1/stats", "/v1/stats")
            check("get", "/v1/health", "/v1/health")
            turn = {"message": "Do you remember my bees?", "now": "2026-01-03T09:00:00Z"}
            check("post", "/v1/users/ann/conversations/c1/turns", conversation + "/turns",
                  json=turn)  # fmt: skip
            check("post", "/v1/users/ann/conversations/c1/turns", conversation + "/turns",
                  json={"message": ""})  # fmt: skip
            check("get", "/v1/users/ann/conversations", "/v1/users/{user_id}/conversations")
            check("get", "/v1/users/ann/conversations/c1", conversation)
            check("get", "/v1/users/bob/conversations/c1", conversation)
            check("delete", "/v1/users/ann/memories/m1", memories + "/{memory_id}")
            check("delete", "/v1/users/ann", "/v1/users/{user_id}")
    finally:
        context.close()
    statuses = {status for _, _, status in seen}
    assert {200, 201, 404, 422} <= statuses, seen


def test_a_conversation_id_is_documented_with_the_length_the_routes_accept() -> None:
    """A client generated from the document refuses what the routes refuse (over 256)."""
    lengths = {
        parameter["schema"]["maxLength"]
        for route in openapi_document()["paths"].values()
        for operation in route.values()
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "conversation_id"
    }
    assert lengths == {MAX_CONVERSATION_ID_CHARS}
