"""Who may serve and who may ask: no open bind beyond loopback, and a token that guards every
path but the health probe without ever being shown.

The guarded server runs with ``--log-level DEBUG``, so the check that its output never holds
the token covers everything it can log.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.plugin.http.serve_process import ServeProcess, running_serve, serve_command, serve_env

TOKEN = f"tok-{secrets.token_urlsafe(24)}"
WRONG = f"tok-{secrets.token_urlsafe(24)}"

GUARDED = [
    ("GET", "/v1/stats", None),
    ("GET", "/v1/users", None),
    ("GET", "/openapi.json", None),
    ("GET", "/v1/users/ann/memories", None),
    ("POST", "/v1/users/ann/memories", {"records": [{"text": "The guard let this through."}]}),
    ("GET", "/v1/users/ann/memories/m1", None),
    ("DELETE", "/v1/users/ann/memories/m1", None),
    ("POST", "/v1/users/ann/recall", {"query": "guard"}),
    ("GET", "/v1/users/ann/export", None),
    ("DELETE", "/v1/users/ann", None),
    ("GET", "/v1/users/ann/conversations", None),
    ("GET", "/v1/no-such-route", None),
]
"""Every kind of path: a request without the right token is refused before routing."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_non_loopback_host_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    port = _free_port()
    data = tmp_path / "data"
    completed = subprocess.run(
        serve_command("--host", "0.0.0.0", "--port", str(port), "--data-dir", str(data)),
        capture_output=True,
        text=True,
        env=serve_env(),
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""  # never "listening on"
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert "--host '0.0.0.0' is not loopback" in lines[0] and "--token" in lines[0]
    assert not data.exists()  # refused before anything was opened, let alone bound
    with socket.socket() as probe:  # and the port it was asked for is still free
        probe.bind(("0.0.0.0", port))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """A server on loopback that requires ``TOKEN``, logging everything it can."""
    data = tmp_path_factory.mktemp("api-guarded")
    with running_serve(data, "--token", TOKEN, "--log-level", "DEBUG") as process:
        yield process


def _authorised(process: ServeProcess, scheme: str = "Bearer") -> httpx.Client:
    return httpx.Client(
        base_url=process.url, headers={"Authorization": f"{scheme} {TOKEN}"}, timeout=120
    )


@pytest.mark.parametrize(
    "header",
    [None, f"Bearer {WRONG}", f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer  {TOKEN}", TOKEN],
    ids=["none", "wrong token", "basic", "longer token", "two spaces", "no scheme"],
)
def test_a_request_without_the_token_is_refused(guarded: ServeProcess, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    with _authorised(guarded) as owner, httpx.Client(base_url=guarded.url, timeout=60) as client:
        before = owner.get("/v1/stats").json()["count"]
        for method, path, body in GUARDED:
            answer = client.request(method, path, json=body, headers=headers)
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert answer.json()["field"] == "Authorization"
            assert TOKEN not in answer.text and WRONG not in answer.text
        assert owner.get("/v1/stats").json()["count"] == before  # the refused POST wrote nothing


def test_the_scheme_is_case_insensitive(guarded: ServeProcess) -> None:
    with _authorised(guarded, "bearer") as client:
        assert client.get("/v1/stats").status_code == 200


def test_the_health_probe_needs_no_token(guarded: ServeProcess) -> None:
    with httpx.Client(base_url=guarded.url, timeout=60) as client:
        answer = client.get("/v1/health")
    assert answer.status_code == 200 and answer.json()["status"] == "ok"


def test_with_the_token_every_endpoint_answers_and_never_shows_it(
    guarded: ServeProcess,
) -> None:
    seen: list[str] = []
    with _authorised(guarded) as client:
        stored = client.post(
            "/v1/users/ann/memories",
            json={"records": [{"id": "m1", "text": "Guarded memory about the sea."}]},
        )
        assert stored.status_code == 201, stored.text
        for method, path, body in GUARDED:
            answer = client.request(method, path, json=body)
            assert answer.status_code != 401, (method, path)
            seen.append(answer.text + str(answer.headers))
        refused = client.post("/v1/users/ann/recall", json={"query": ""})  # a problem, too
        assert refused.status_code == 422
        seen.append(refused.text + str(refused.headers))
    assert all(TOKEN not in text for text in seen)
    output = guarded.output()
    assert "listening on" in output
    assert TOKEN not in output and WRONG not in output
