"""``POST /v1/users/{u}/recall`` gives what ``ChromaMemory.recall`` gives for the same arguments.

The server writes the memories; the test process then opens the same store (the Chroma server
and the memory index file the server uses) and recalls with the same query, ``now``,
``top_k``, mood, filter and settings, built here with the project's own settings reader rather
than the server's parser. Ids, order, every score factor (within 1e-9), the relevance parts,
the time rules and the plan must agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from affect_memory.memory.settings import recall_settings_from_json
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.http.conftest import Api

USER = "parity"
TEXTS = [
    ("I started learning the cello in January.", "2025-01-12T19:00:00+01:00", "music"),
    ("My cello teacher says my bowing improved a lot.", "2025-03-02T18:00:00+01:00", "music"),
    ("We hiked up to the lake above the village.", "2025-04-20T09:30:00+02:00", "outdoors"),
    ("I sold my old bike and bought a lighter one.", "2025-05-05T12:00:00+02:00", "outdoors"),
    ("The concert with the youth orchestra went well.", "2025-06-14T21:00:00+02:00", "music"),
    ("Mum's birthday dinner was at the Greek place.", "2025-07-01T20:00:00+02:00", "family"),
    ("I now play the cello every morning before work.", "2025-08-10T07:00:00+02:00", "music"),
    ("My brother lost his job and is worried.", "2025-08-22T16:00:00+02:00", "family"),
]

QUERIES = [
    {"query": "How is my cello playing going these days?", "top_k": 4,
     "now": "2025-09-01T10:00:00+02:00"},
    {"query": "cello", "top_k": 3, "now": "2025-09-01T10:00:00+02:00", "mood_valence": 0.4,
     "where": {"extra.topic": {"$in": ["music", "family"]}},
     "settings": {"lexical_weight": 0.45,
                  "weights": {"recency_horizon_days": 20.0, "recency_floor": 0.2}}},
    {"query": "What happened with my family in summer?", "top_k": 6,
     "now": "2025-12-24T18:00:00Z", "mood_valence": -0.3,
     "settings": {"ranking": "dense", "dense_candidates": 8}},
]


@pytest.fixture(scope="module")
def seeded(chroma_api: Api) -> Api:
    """The Chroma-server API with ``USER``'s memories, written by the server."""
    records = [
        {"id": f"p{number}", "text": text, "timestamp": stamp, "metadata": {"topic": topic},
         "significance": 0.3 + 0.05 * number, "valence": round(0.2 * (number % 3) - 0.2, 2)}
        for number, (text, stamp, topic) in enumerate(TEXTS)
    ]
    answer = chroma_api.client.post(f"/v1/users/{USER}/memories", json={"records": records})
    assert answer.status_code == 201, answer.text
    return chroma_api


@pytest.fixture(scope="module")
def memory(seeded: Api, embedder: Embedder) -> Iterator[ChromaMemory]:
    """The same store, opened in the test process."""
    with ChromaMemory(
        seeded.chroma or "", collection=seeded.collection, index=seeded.index, embedder=embedder
    ) as opened:
        yield opened


def _flat(settings: dict[str, Any]) -> dict[str, Any]:
    """A settings tree as the flat settings-file object the project's reader takes."""
    return {**{k: v for k, v in settings.items() if k != "weights"}, **settings.get("weights", {})}


def _same(served: Any, direct: Any, where: str) -> None:
    """Equal, numbers within 1e-9 (None, strings, lists and objects exactly in shape)."""
    if isinstance(direct, float) and isinstance(served, int | float):
        assert math.isclose(served, direct, rel_tol=0, abs_tol=1e-9), (where, served, direct)
    elif isinstance(direct, dict):
        assert isinstance(served, dict) and list(served) == list(direct), where
        for key in direct:
            _same(served[key], direct[key], f"{where}.{key}")
    elif isinstance(direct, list):
        assert isinstance(served, list) and len(served) == len(direct), where
        for index, (left, right) in enumerate(zip(served, direct, strict=True)):
            _same(left, right, f"{where}[{index}]")
    else:
        assert served == direct, (where, served, direct)


@pytest.mark.parametrize("arguments", QUERIES, ids=["plain", "filtered with settings", "dense"])
def test_the_api_ranks_as_the_store_does(
    seeded: Api, memory: ChromaMemory, arguments: dict[str, Any]
) -> None:
    answer = seeded.client.post(f"/v1/users/{USER}/recall", json=arguments)
    assert answer.status_code == 200, answer.text
    served = answer.json()
    settings = arguments.get("settings")
    direct = memory.recall(
        arguments["query"],
        USER,
        mood_valence=arguments.get("mood_valence", 0.0),
        now=datetime.fromisoformat(arguments["now"]),
        top_k=arguments["top_k"],
        where=arguments.get("where"),
        settings=None if settings is None else recall_settings_from_json(_flat(settings)),
    ).to_json()
    assert [hit["id"] for hit in served["results"]] == [hit["id"] for hit in direct["results"]]
    assert direct["results"], "the query found nothing to compare"
    _same(served, direct, "result")
