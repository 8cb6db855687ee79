"""Every ```ts block in README.md and docs/ compiles with the pinned TypeScript compiler under
``--strict`` and, run with node against a live ``affect-memory serve`` (token required), does
what it says: it stores its memories, prints the hits the API returned in the order it
returned them, and prints the detail of the problem it provoked, having written nothing.

The program talks to the server through a recording proxy, so the test compares the output
with the very responses the program read. tsc comes from ``make install`` (``npm ci`` in
``tests/plugin/http/typescript``), never from the network at test time; without node or tsc
the test skips saying why, except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.plugin.http.serve_process import running_serve

ROOT = Path(__file__).resolve().parents[3]
COMPILER = Path(__file__).resolve().parent / "typescript"
TSC = COMPILER / "node_modules" / ".bin" / "tsc"
GUIDE = ROOT / "docs" / "guides" / "http.md"
_FENCE = re.compile(r"^```(?:ts|typescript)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_HIT = re.compile(r"^(\d+)\. (-?\d+\.\d{3})  (.*)$")


def _blocks() -> list[tuple[str, str]]:
    """Each ```ts block of README.md and docs/**/*.md: a label (file and block number) and code."""
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found: list[tuple[str, str]] = []
    for source in sources:
        if not source.is_file():
            continue
        for number, match in enumerate(_FENCE.finditer(source.read_text("utf-8")), start=1):
            found.append((f"{source.relative_to(ROOT)}#{number}", match.group(1)))
    return found


BLOCKS = _blocks()


def _require(tool: Path | None, why: str) -> Path:
    """The tool's path; without it a skip saying why, or under CI a failure."""
    if tool is not None and tool.exists():
        return tool
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI must run the TypeScript example)")
    pytest.skip(why)


def _node() -> Path:
    found = shutil.which("node")
    return _require(Path(found) if found else None, "node is not installed")


def _tsc() -> Path:
    return _require(TSC, f"tsc is not installed: run `make install` (npm ci in {COMPILER})")


def _compile(code: str, directory: Path) -> Path:
    """``code`` compiled as the guide says (``tsc --types node client.mts``), also under
    ``--strict``: the path of the JavaScript."""
    source = directory / "client.mts"
    source.write_text(code, "utf-8")
    completed = subprocess.run(
        [str(_tsc()), "--types", "node", "--strict", "--noEmitOnError",
         "--typeRoots", str(COMPILER / "node_modules" / "@types"),
         "--outDir", str(directory / "out"), str(source)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, f"tsc refused the example:\n{completed.stdout}"
    return directory / "out" / "client.mjs"


def test_the_guide_shows_a_typescript_client() -> None:
    text = GUIDE.read_text("utf-8")
    section = text[text.index("\n## From TypeScript\n") :]
    assert _FENCE.search(section), "docs/guides/http.md: no ```ts block under ## From TypeScript"
    assert any(label.startswith("docs/guides/http.md#") for label, _ in BLOCKS)


@pytest.mark.parametrize(("label", "code"), BLOCKS, ids=[label for label, _ in BLOCKS])
def test_the_example_compiles_under_strict(label: str, code: str, tmp_path: Path) -> None:
    _node()
    assert _compile(code, tmp_path).is_file()


# ---------------------------------------------------------------- the live run


@dataclass(frozen=True)
class Exchange:
    """One request the program made and the server's answer, as the proxy passed them on."""

    method: str
    path: str
    authorization: str | None
    status: int
    content_type: str
    body: Any


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = httpx.Client(base_url=upstream, timeout=120)
        self.exchanges: list[Exchange] = []


class _Forward(BaseHTTPRequestHandler):
    """Pass a request to the server unchanged and its answer back, keeping both."""

    server: _Recorder

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        headers = {
            name: value
            for name, value in self.headers.items()
            if name.lower() in ("authorization", "content-type", "accept")
        }
        answer = self.server.upstream.request(
            self.command, self.path, headers=headers, content=self.rfile.read(length)
        )
        content_type = answer.headers.get("content-type", "")
        self.server.exchanges.append(
            Exchange(
                self.command,
                self.path,
                self.headers.get("Authorization"),
                answer.status_code,
                content_type,
                answer.json() if "json" in content_type else answer.text,
            )
        )
        self.send_response(answer.status_code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the exchanges, not a log."""


@dataclass(frozen=True)
class Served:
    """A running server that requires ``token``."""

    url: str
    token: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``affect-memory serve`` on a store of its own, requiring a bearer token (given in its
    environment, as the guide advises)."""
    token = secrets.token_urlsafe(24)
    data = tmp_path_factory.mktemp("typescript-client")
    with running_serve(data, env={"AFFECT_MEMORY_TOKEN": token}) as process:
        yield Served(process.url, token)


@pytest.fixture(scope="module")
def recorder(served: Served) -> Iterator[_Recorder]:
    """A recording proxy in front of the module's server, on a free loopback port."""
    proxy = _Recorder(served.url)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        proxy.upstream.close()
        thread.join(timeout=10)


def _client(served: Served) -> httpx.Client:
    """A client of the server itself (not through the proxy), with the token."""
    return httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}, timeout=120
    )


def _erase_everyone(served: Served) -> None:
    """Start from an empty store: every user the server knows is erased through the API."""
    with _client(served) as client:
        for user in client.get("/v1/users").raise_for_status().json()["users"]:
            client.delete(f"/v1/users/{user['user_id']}").raise_for_status()
        assert client.get("/v1/users").json()["users"] == []


def _run(node: Path, script: Path, proxy: _Recorder, token: str) -> list[str]:
    proxy.exchanges.clear()
    env = {**os.environ, "AFFECT_MEMORY_URL": f"http://127.0.0.1:{proxy.server_port}",
           "AFFECT_MEMORY_TOKEN": token}  # fmt: skip
    completed = subprocess.run(
        [str(node), str(script)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    return completed.stdout.splitlines()


@pytest.mark.parametrize(("label", "code"), BLOCKS, ids=[label for label, _ in BLOCKS])
def test_the_example_prints_what_the_api_answered(
    label: str, code: str, tmp_path: Path, served: Served, recorder: _Recorder
) -> None:
    node = _node()
    script = _compile(code, tmp_path)
    _erase_everyone(served)
    printed = _run(node, script, recorder, served.token)
    exchanges = list(recorder.exchanges)
    assert exchanges and all(e.authorization == f"Bearer {served.token}" for e in exchanges)

    stored = [e for e in exchanges if e.method == "POST" and e.status == 201]
    assert len(stored) == 1 and stored[0].path.endswith("/memories")
    ids = stored[0].body["ids"]
    assert printed[0] == f"stored {', '.join(ids)}"

    recalls = [e for e in exchanges if e.path.endswith("/recall")]
    assert len(recalls) == 1 and recalls[0].status == 200
    hits = recalls[0].body["results"]
    assert len(hits) >= 2
    shown = [_HIT.match(line) for line in printed[1 : 1 + len(hits)]]
    assert all(shown), printed
    assert [(int(m[1]), m[3]) for m in shown if m] == [
        (rank, hit["text"]) for rank, hit in enumerate(hits, start=1)
    ]
    assert [float(m[2]) for m in shown if m] == pytest.approx(
        [hit["score"] for hit in hits], abs=5e-4 + 1e-9
    )

    refused = [e for e in exchanges if e.status >= 400]
    assert len(refused) == 1 and refused[0].status == 422
    assert refused[0].content_type.startswith("application/problem+json")
    problem = refused[0].body
    assert printed[1 + len(hits) :] == [f"refused ({problem['status']}): {problem['detail']}"]

    user = stored[0].path.split("/")[3]
    with _client(served) as client:
        listed = client.get(f"/v1/users/{user}/memories").raise_for_status().json()
    assert sorted(m["id"] for m in listed["memories"]) == sorted(ids)  # the bad one: not written

    again = _run(node, script, recorder, served.token)  # as its comment says: rerun, no doubles
    assert again[0] == printed[0] and len(again) == len(printed)
    with _client(served) as client:
        assert client.get(f"/v1/users/{user}/memories").json()["total"] == len(ids)

