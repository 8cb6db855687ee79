"""The memory inspector in a real headless chromium against a real ``affect-memory serve``.

One server for the module (``serve --inspector --port 0`` with a bearer token, stopped by PID)
on a seeded store: bob's conversation of four turns, run before the server starts by a real
engine with a scripted model against the state file the server then reads; through the API,
alice's twelve memories (paging, search, recall, export), carol's (to erase), bob's, and
mallory's memory written as markup, which must show as text. Each check compares
what the page shows with the API's own answer to the same request, fetched by the test. Every
page also proves it worked offline and cleanly: no request left the server, no script error,
no refused resource but the 401 that makes it ask for the token.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from affect_memory.http.inspector import ASSETS, STATIC_DIR
from affect_memory.kernel.adapters.scripted_model import ScriptedModel
from affect_memory.kernel.engine import AffectEngine
from affect_memory.kernel.protocols import GateResult
from affect_memory.state.location import open_state_store
from tests.plugin.http.serve_process import ServeProcess, running_serve

CHROMIUM = Path("/usr/bin/chromium")


def _missing(why: str) -> None:
    """Skip the module saying why, except under CI=true, where the browser is required."""
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{why}: CI requires it (make install installs it)")
    pytest.skip(f"{why} (make install installs it)", allow_module_level=True)


try:
    from playwright import sync_api as playwright_api
except ImportError:
    _missing("the playwright package is not installed")
if not CHROMIUM.exists():
    _missing(f"{CHROMIUM} is missing")

Browser = playwright_api.Browser
Page = playwright_api.Page
expect = playwright_api.expect

BERLIN = "Europe/Berlin"
"""The browser's time zone: the page must send ``now`` with Berlin's offset, not UTC's."""

_ASKED_FOR_TOKEN = "status of 401"
"""The console line chromium logs for the request the token dialog answers: expected."""

SCORE_FACTORS = ("similarity", "recency", "salience", "episode", "congruence")
"""A hit's features when the hit does not list them: the factors of its score."""

ALICE_TEXTS = (
    "Walked Biscuit along the beach at sunrise; he chased every gull.",
    "Planted tomatoes and basil in the garden beds behind the house.",
    "Got the promotion to team lead after the quarterly review.",
    "Biscuit the dog was sick overnight and we went to the vet.",
    "Long phone call with my sister about moving to Lisbon.",
    "The garden flooded after the storm and the basil drowned.",
    "Ran my first half marathon in 1:52, legs shaking at the end.",
    "Argued with Sam about the budget for the kitchen renovation.",
    "Picnic in the community Garden with the neighbours.",
    "Biscuit learned to fetch the frisbee at the dog park.",
    "Finished reading a novel about a lighthouse keeper.",
    "Quiet evening: tea, rain on the window, and an old film.",
)

MARKUP = '<img src=x onerror="window.pwned=1"><b>bold</b> & <script>window.pwned=2</script>'
"""Mallory's memory: shown as these very characters, never as elements."""

BOB_TURNS = (
    ("I had a wonderful day at the beach with my friends!", "VULNERABILITY", "Sounds lovely."),
    ("You never listen, you useless machine.", "ABUSE", "I hear you are upset."),
    ("Sorry, I lost my wallet and took it out on you.", "APOLOGY", "That is all right."),
    ("How do people usually get a lost wallet back?", "CURIOSITY", "Often someone hands it in."),
)
"""Bob's conversation: each message, the intent the scripted gate reads in it, the reply."""


@dataclass(frozen=True)
class Server:
    """The running server: its process, a client holding the token, and the token."""

    process: ServeProcess
    api: httpx.Client
    token: str

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.process.url


def _records(user: str, texts: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{user}-{number:02d}",
            "text": text,
            "timestamp": f"2025-{number:02d}-{10 + number:02d}T08:30:00+01:00",
            "significance": round(0.2 + 0.05 * number, 2),
            "valence": round(((-1) ** number) * 0.07 * number, 2),
        }
        for number, text in enumerate(texts, start=1)
    ]


def _seed(api: httpx.Client) -> None:
    """Alice, carol and mallory's memories, and bob's memories and one conversation."""
    batches = {
        "alice": _records("alice", ALICE_TEXTS),
        "carol": _records("carol", ("Carol's first memory.", "Carol's second.", "Third.")),
        "mallory": _records("mallory", (MARKUP,)),
        "bob": _records("bob", ("Bob went to the beach.", "Bob lost his wallet once.")),
    }
    for user, records in batches.items():
        answer = api.post(f"/v1/users/{user}/memories", json={"records": records})
        assert answer.status_code == 201, answer.text


async def _converse(state: Path) -> None:
    """Bob's conversation, turn by turn through a real engine with a scripted model (its gate
    reads each message's intent, so the mood moves and emotions arise), into the state file
    the server will read."""
    model = ScriptedModel(
        gates=[GateResult(intent=intent) for _, intent, _ in BOB_TURNS],
        replies=[[reply] for _, _, reply in BOB_TURNS],
    )
    moment = [datetime(2026, 2, 1, 19, 0, tzinfo=UTC)]
    store = open_state_store(state)
    try:
        assert await store.claim_conversation("evening-chat", "bob")  # as the turn endpoint does
        engine = AffectEngine(
            model=model,
            store=store,
            conversation_id="evening-chat",
            user_id="bob",
            clock=lambda: moment[0],
        )
        for day, (message, _, _) in enumerate(BOB_TURNS):
            moment[0] = datetime(2026, 2, 1 + day, 19, 0, tzinfo=UTC)
            await engine.turn(message)
    finally:
        store.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``affect-memory serve --inspector`` with a token on a seeded store."""
    token = secrets.token_urlsafe(24)
    data = tmp_path_factory.mktemp("inspector-store")
    state = data / "state.db"
    with ThreadPoolExecutor(1) as worker:  # playwright's sync API holds this thread's loop
        worker.submit(asyncio.run, _converse(state)).result()
    authorised = {"Authorization": f"Bearer {token}"}
    with (
        running_serve(
            data,
            *("--inspector", "--model", "scripted", "--state", str(state)),
            env={"AFFECT_MEMORY_TOKEN": token},
        ) as process,
        httpx.Client(base_url=process.url, headers=authorised, timeout=120) as api,
    ):
        _seed(api)
        yield Server(process, api, token)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium, headless, driven by playwright (nothing downloaded)."""
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A fresh tab in Berlin time; after the test, it must have made no foreign request, had
    no script error and logged no error but the expected 401."""
    context = browser.new_context(
        timezone_id=BERLIN, accept_downloads=True, viewport={"width": 1280, "height": 900}
    )
    tab = context.new_page()
    trouble: list[str] = []
    tab.on("pageerror", lambda error: trouble.append(f"script error: {error}"))
    tab.on(
        "console",
        lambda message: trouble.append(f"console: {message.text}")
        if message.type == "error" and _ASKED_FOR_TOKEN not in message.text
        else None,
    )
    tab.on(
        "request",
        lambda request: trouble.append(f"left the server: {request.url}")
        if not request.url.startswith((f"{server.url}/", "blob:", "data:"))
        else None,
    )
    yield tab
    context.close()
    assert not trouble, "\n".join(trouble)


def _by(page: Page, test_id: str) -> Any:
    return page.get_by_test_id(test_id)


def _open(page: Page, server: Server) -> None:
    """Load the page, give it the token it asks for, and wait for the user list."""
    page.goto(f"{server.url}/")
    expect(_by(page, "token-dialog")).to_be_visible()
    _by(page, "token-input").fill(server.token)
    _by(page, "token-submit").click()
    expect(_by(page, "user-select").locator("option")).not_to_have_count(0)


def _pick(page: Page, user: str) -> None:
    """Choose ``user`` and wait until the memories table and the conversation list are that
    user's."""
    _by(page, "user-select").select_option(user)
    expect(_by(page, "memories-body")).to_have_attribute("data-user", user)
    expect(_by(page, "conversation-list")).to_have_attribute("data-user", user)


def _shown_rows(page: Page) -> list[dict[str, str]]:
    return list(
        _by(page, "memory-row").evaluate_all(
            """rows => rows.map(row => ({
                id: row.dataset.id,
                text: row.querySelector('[data-testid="memory-text"]').textContent,
                timestamp: row.querySelector('[data-testid="memory-timestamp"]').textContent,
                significance: row.querySelector('[data-testid="memory-significance"]').textContent,
                valence: row.querySelector('[data-testid="memory-valence"]').textContent,
                recall_count: row.querySelector('[data-testid="memory-recall-count"]').textContent,
            }))"""
        )
    )


def _assert_rows_match(page: Page, memories: list[dict[str, Any]]) -> None:
    expect(_by(page, "memory-row")).to_have_count(len(memories))
    rows = _shown_rows(page)
    assert [row["id"] for row in rows] == [memory["id"] for memory in memories]
    for row, memory in zip(rows, memories, strict=True):
        assert row["text"] == memory["text"]
        assert row["timestamp"] == memory["timestamp"]
        assert float(row["significance"]) == pytest.approx(memory["significance"], abs=5e-4)
        assert float(row["valence"]) == pytest.approx(memory["valence"], abs=5e-4)
        assert int(row["recall_count"]) == memory["recall_count"]


def _bars(hit: Any, test_id: str) -> list[tuple[str, float | None, float]]:
    """Each bar of a hit's chart: its name, the value it carries, and its drawn length."""
    drawn = hit.get_by_test_id(test_id).evaluate_all(
        """groups => groups.map(group => [
            group.dataset.name,
            group.dataset.value,
            Number(group.querySelector('rect.bar').getAttribute('width')),
        ])"""
    )
    return [(name, float(value) if value else None, length) for name, value, length in drawn]


def _assert_chart(
    shown: list[tuple[str, float | None, float]], wanted: list[tuple[str, Any]]
) -> None:
    """The bars are the entries in order, with their values, each drawn on the 160-pixel track
    as long as its magnitude (a magnitude over 1 fills it)."""
    assert [name for name, _, _ in shown] == [name for name, _ in wanted]
    for (name, value, length), (_, expected) in zip(shown, wanted, strict=True):
        if isinstance(expected, int | float):
            assert value == pytest.approx(expected, abs=1e-9), name
            assert length == pytest.approx(min(abs(expected), 1.0) * 160, abs=1e-6), name
        else:
            assert value is None and length == 0, name


def _features(hit: dict[str, Any]) -> list[tuple[str, Any]]:
    if "features" in hit:
        return list(hit["features"].items())
    return [(name, hit[name]) for name in SCORE_FACTORS]


def _weights(hit: dict[str, Any]) -> list[tuple[str, Any]]:
    if "weights" in hit:
        return list(hit["weights"].items())
    return list(((hit.get("relevance") or {}).get("weights") or {}).items())


def test_the_page_asks_for_the_token_once_and_sends_it(page: Page, server: Server) -> None:
    answer = httpx.get(f"{server.url}/")
    assert answer.status_code == 200, "the page itself needs no token: it has to ask for it"
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert httpx.get(f"{server.url}/v1/users").status_code == 401, "the data does need it"

    page.goto(f"{server.url}/")
    expect(_by(page, "token-dialog")).to_be_visible()
    _by(page, "token-input").fill("not-the-token")
    _by(page, "token-submit").click()
    expect(_by(page, "token-reason")).to_contain_text("refused")
    with page.expect_request(lambda request: request.url.endswith("/v1/users")) as asked:
        _by(page, "token-input").fill(server.token)
        _by(page, "token-submit").click()
    assert asked.value.headers["authorization"] == f"Bearer {server.token}"
    expect(_by(page, "token-dialog")).to_be_hidden()
    listed = [user["user_id"] for user in server.api.get("/v1/users").json()["users"]]
    options = _by(page, "user-select").locator("option")
    expect(options).to_have_count(len(listed))
    assert options.evaluate_all("all => all.map(o => o.value)") == listed

    page.reload()  # the token is kept for the tab: no second question
    expect(options).to_have_count(len(listed))
    expect(_by(page, "token-dialog")).to_be_hidden()
    assert server.token not in page.content(), "the token is never written into the page"
    assert server.token not in server.process.output(), "nor into the server's output"


def test_only_the_pages_own_files_are_served(server: Server) -> None:
    assert {path.name for path in STATIC_DIR.iterdir()} == {"index.html", *ASSETS}
    for name, media_type in ASSETS.items():
        asset = httpx.get(f"{server.url}/inspector/{name}")
        assert asset.status_code == 200, name
        assert asset.headers["content-type"].startswith(media_type), name
        assert asset.headers["x-content-type-options"] == "nosniff", name
    for other in ("index.html", "..%2Finspector.py", "%2E%2E/%2E%2E/pyproject.toml", ""):
        refused = server.api.get(f"/inspector/{other}")  # with the token: 404, not a file
        assert refused.status_code == 404, other
        assert refused.headers["content-type"].startswith("application/problem+json"), other


def test_recall_shows_the_apis_hits_features_and_weights(
    page: Page, server: Server, tmp_path: Path
) -> None:
    _open(page, server)
    _pick(page, "alice")
    _by(page, "tab-recall").click()
    _by(page, "recall-query").fill("walking my dog on the beach")
    _by(page, "recall-now").fill("2026-01-15T09:30")
    _by(page, "recall-mood").fill("0.4")
    _by(page, "recall-top-k").fill("5")
    with page.expect_request(lambda request: request.url.endswith("/recall")) as sent:
        _by(page, "recall-submit").click()
    body = sent.value.post_data_json
    assert body == {
        "query": "walking my dog on the beach",
        "top_k": 5,
        "mood_valence": 0.4,
        "now": "2026-01-15T09:30:00+01:00",  # Berlin's winter offset, from the browser
    }
    answer = server.api.post("/v1/users/alice/recall", json=body)
    assert answer.status_code == 200, answer.text
    expected = answer.json()
    hits = expected.get("hits", expected.get("results"))
    assert len(hits) == 5

    shown = _by(page, "hit")
    expect(shown).to_have_count(len(hits))
    assert shown.evaluate_all("all => all.map(h => h.dataset.id)") == [hit["id"] for hit in hits]
    for index, hit in enumerate(hits):
        item = shown.nth(index)
        expect(item.get_by_test_id("hit-text")).to_have_text(hit["text"])
        score = float(item.get_by_test_id("hit-score").get_attribute("data-value"))
        assert score == pytest.approx(hit["score"], abs=1e-6)
        explanation = hit.get("explanation", hit.get("time_rule", ""))
        expect(item.get_by_test_id("hit-explanation")).to_have_text(explanation)
        _assert_chart(_bars(item, "feature-bar"), _features(hit))
        _assert_chart(_bars(item, "weight-bar"), _weights(hit))

    plan = expected["plan"]
    fields = _by(page, "plan-field")
    assert fields.evaluate_all("all => all.map(f => f.dataset.key)") == list(plan)
    kind = page.locator('[data-testid="plan-field"][data-key="kind"]')
    expect(kind).to_have_text(str(plan["kind"]))
    page.screenshot(path=tmp_path / "inspector-recall.png", full_page=True)


def test_memories_page_through_and_search(page: Page, server: Server, tmp_path: Path) -> None:
    _open(page, server)
    _pick(page, "alice")
    _by(page, "memories-page-size").select_option("5")

    def api_page(offset: int, q: str | None = None) -> dict[str, Any]:
        parameters: dict[str, Any] = {"offset": offset, "limit": 5}
        if q is not None:
            parameters["q"] = q
        found = server.api.get("/v1/users/alice/memories", params=parameters)
        assert found.status_code == 200, found.text
        return dict(found.json())

    first = api_page(0)
    assert first["total"] == len(ALICE_TEXTS)
    _assert_rows_match(page, first["memories"])
    expect(_by(page, "memories-range")).to_have_text(f"1–5 of {len(ALICE_TEXTS)}")
    expect(_by(page, "memories-prev")).to_be_disabled()
    page.screenshot(path=tmp_path / "inspector-memories.png", full_page=True)

    _by(page, "memories-next").click()
    expect(_by(page, "memories-range")).to_have_text(f"6–10 of {len(ALICE_TEXTS)}")
    _assert_rows_match(page, api_page(5)["memories"])
    _by(page, "memories-next").click()
    expect(_by(page, "memories-range")).to_have_text(f"11–12 of {len(ALICE_TEXTS)}")
    _assert_rows_match(page, api_page(10)["memories"])
    expect(_by(page, "memories-next")).to_be_disabled()
    _by(page, "memories-prev").click()
    expect(_by(page, "memories-range")).to_have_text(f"6–10 of {len(ALICE_TEXTS)}")
    _assert_rows_match(page, api_page(5)["memories"])

    with page.expect_request(lambda request: "q=garden" in request.url):
        _by(page, "memory-search").fill("garden")
        _by(page, "memory-search").press("Enter")
    found = api_page(0, "garden")
    assert found["total"] == 3  # "Garden" too: the search ignores case
    expect(_by(page, "memories-range")).to_have_text("1–3 of 3")
    _assert_rows_match(page, found["memories"])
    expect(_by(page, "memories-next")).to_be_disabled()
    expect(_by(page, "memories-prev")).to_be_disabled()


def test_a_memory_written_as_markup_shows_as_text(page: Page, server: Server) -> None:
    _open(page, server)
    _pick(page, "mallory")
    expect(_by(page, "memory-text")).to_have_text(MARKUP)
    assert _by(page, "memories-table").locator("img, b, script").count() == 0
    assert page.evaluate("window.pwned") is None


def test_a_conversation_plots_one_mood_point_per_turn(
    page: Page, server: Server, tmp_path: Path
) -> None:
    conversation = server.api.get("/v1/users/bob/conversations/evening-chat").json()
    turns = conversation["turns"]
    assert [turn["user"] for turn in turns] == [message for message, _, _ in BOB_TURNS]
    assert any(turn["emotions"] for turn in turns), "the seeded turns raised emotions"
    _open(page, server)
    _pick(page, "bob")
    _by(page, "tab-conversations").click()
    listed = server.api.get("/v1/users/bob/conversations").json()["conversations"]
    expect(_by(page, "conversation-item")).to_have_count(len(listed))
    page.locator('[data-conversation-id="evening-chat"]').click()

    points = _by(page, "mood-point")
    expect(points).to_have_count(3 * len(turns))
    drawn = points.evaluate_all(
        "all => all.map(p => [p.dataset.dim, Number(p.dataset.turn), Number(p.dataset.value)])"
    )
    for dim in ("pleasure", "arousal", "dominance"):
        line = [(turn, value) for name, turn, value in drawn if name == dim]
        assert [turn for turn, _ in line] == [turn["index"] for turn in turns], dim
        for (_, value), turn in zip(line, turns, strict=True):
            assert value == pytest.approx(turn["mood"][dim], abs=1e-9), dim

    shown = _by(page, "turn")
    expect(shown).to_have_count(len(turns))
    assert _by(page, "turn-user").all_text_contents() == [turn["user"] for turn in turns]
    assert _by(page, "turn-assistant").all_text_contents() == [t["assistant"] for t in turns]
    for index, turn in enumerate(turns):
        chips = shown.nth(index).get_by_test_id("turn-emotion").evaluate_all(
            "all => all.map(c => [c.dataset.name, Number(c.dataset.value)])"
        )
        strongest = sorted(
            ((name, value) for name, value in turn["emotions"].items() if value >= 0.005),
            key=lambda item: -item[1],
        )
        assert [name for name, _ in chips] == [name for name, _ in strongest]
        assert [value for _, value in chips] == pytest.approx([v for _, v in strongest])
    page.screenshot(path=tmp_path / "inspector-conversation.png", full_page=True)


def test_export_downloads_what_the_api_exports(page: Page, server: Server) -> None:
    _open(page, server)
    _pick(page, "alice")
    _by(page, "tab-manage").click()
    with page.expect_download() as started:
        _by(page, "export-button").click()
    download = started.value
    assert download.suggested_filename == "affect-memory-alice.ndjson"
    lines = Path(download.path()).read_text(encoding="utf-8").splitlines()
    expected = server.api.get("/v1/users/alice/export")
    assert expected.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line) for line in lines] == [
        json.loads(line) for line in expected.text.splitlines()
    ]
    assert len(lines) == len(ALICE_TEXTS)


def test_erase_happens_only_after_confirming(page: Page, server: Server, tmp_path: Path) -> None:
    def total(user: str) -> int:
        return int(server.api.get(f"/v1/users/{user}/memories").json()["total"])

    alice_before = total("alice")
    bob_turns = len(server.api.get("/v1/users/bob/conversations/evening-chat").json()["turns"])
    assert total("carol") == 3
    erasures: list[str] = []
    page.on("request", lambda r: erasures.append(r.url) if r.method == "DELETE" else None)
    _open(page, server)
    _pick(page, "carol")
    _by(page, "tab-manage").click()

    _by(page, "erase-button").click()
    expect(_by(page, "erase-dialog")).to_be_visible()
    expect(_by(page, "erase-confirm")).to_be_disabled()
    _by(page, "erase-confirm-input").fill("caro")
    expect(_by(page, "erase-confirm")).to_be_disabled()
    page.screenshot(path=tmp_path / "inspector-erase-dialog.png")
    _by(page, "erase-cancel").click()
    expect(_by(page, "erase-dialog")).to_be_hidden()
    expect(_by(page, "status")).to_have_text("erase cancelled")
    assert erasures == [] and total("carol") == 3

    _by(page, "erase-button").click()
    _by(page, "erase-confirm-input").fill("carol")
    with page.expect_response(lambda answer: answer.request.method == "DELETE") as erased:
        _by(page, "erase-confirm").click()
    assert erased.value.ok
    expect(_by(page, "erase-report")).to_be_visible()
    report = json.loads(_by(page, "erase-report").text_content())
    assert report["user_id"] == "carol" and report["memories"] == 3
    assert erasures == [f"{server.url}/v1/users/carol"]

    assert total("carol") == 0
    assert "carol" not in [user["user_id"] for user in server.api.get("/v1/users").json()["users"]]
    assert total("alice") == alice_before
    assert len(server.api.get("/v1/users/bob/conversations/evening-chat").json()["turns"]) == (
        bob_turns
    )
    options = _by(page, "user-select").locator("option")
    expect(options.filter(has_text="carol")).to_have_count(0)
