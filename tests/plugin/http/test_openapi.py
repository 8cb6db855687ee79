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
