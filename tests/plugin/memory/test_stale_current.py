"""The stale-versus-current corpora keep their measured ranking, however they are asked.

Every set's MRR of the current fact (its rank in the top 10, through ``recall_many`` as
``recall --queries`` runs it) stays within 0.02 of what the rules scored
(``fixtures/stale_current/README.md``); the sets rewritten into every phrasing and into
third-person memories keep every phrasing at 0.88 or more and within 0.03 of the first
person. ``test_hybrid`` shows each rule's effect on one ranking directly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from affect_memory.memory.settings import DENSE_RECALL, RecallSettings
from affect_memory.memory.store import ChromaMemory
from affect_memory.metrics import reciprocal_rank
from affect_memory.models.embeddings import Embedder

CORPORA = Path(__file__).resolve().parents[3] / "fixtures" / "stale_current"
NOW = "2026-06-01T12:00:00Z"
MEASURED = {
    "a": 0.836, "b": 0.726, "c": 0.969, "d": 0.844, "e": 0.820, "f": 0.750,
    "g": 0.879, "h": 0.889, "i": 0.842, "j": 0.898, "k": 0.865, "l": 0.857,
    "m": 0.891, "n": 0.874, "o": 0.787, "p": 0.865, "q": 0.831, "r": 0.919,
    "s": 0.918, "t": 0.734, "u": 0.897, "v": 0.934, "w": 0.936, "x": 0.888,
    "y": 0.967, "z1": 0.943, "z2": 0.926, "z3": 0.935, "z4": 0.868,
}  # fmt: skip
"""Each set's MRR under the rules this test guards (a drop beyond 0.02 fails it)."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_a_corpus_keeps_its_current_facts_first(
    name: str, tmp_path: Path, embedder: Embedder
) -> None:
    memories = _lines(CORPORA / name / "memories.jsonl")
    probes = _lines(CORPORA / name / "probes.jsonl")
    assert (len(memories), len(probes)) == (180, 60)
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(memories)
        results = memory.recall_many(
            [{"query": p["query"], "user_id": p["user_id"]} for p in probes], now=NOW, top_k=10
        )
    reciprocal = [
        reciprocal_rank([hit.id for hit in result.results], {probe["current"]})
        for probe, result in zip(probes, results, strict=True)
    ]
    assert sum(reciprocal) / len(reciprocal) >= MEASURED[name] - 0.02


REPHRASED = ("u", "v", "x", "y", "z1", "z2", "z3", "z4")
"""The sets also written in every phrasing (``probes.third``, ``probes.name``,
``probes.keyword``) and with third-person memories (``memories.third``)."""
PHRASINGS = ("probes", "probes.third", "probes.name", "probes.keyword")
FLOOR = 0.88
"""Every phrasing's mean MRR over the rephrased sets is at least this (issue 21)."""
SPREAD = 0.03
"""... and within this of the first-person questions over first-person memories."""


def _mean_mrr(
    memory: ChromaMemory, probes: list[dict[str, Any]], settings: RecallSettings | None = None
) -> float:
    results = memory.recall_many(
        [{"query": p["query"], "user_id": p["user_id"]} for p in probes],
        now=NOW,
        top_k=10,
        settings=settings,
    )
    reciprocal = [
        reciprocal_rank([hit.id for hit in result.results], {probe["current"]})
        for probe, result in zip(probes, results, strict=True)
    ]
    return sum(reciprocal) / len(reciprocal)


@pytest.mark.parametrize("memories", ["memories", "memories.third"])
def test_every_phrasing_keeps_the_current_facts_first(
    memories: str, tmp_path: Path, embedder: Embedder
) -> None:
    """The same questions asked in the first person, about "the user", by name and as
    keywords, over memories written in the first or the third person, score alike."""
    scores: dict[str, list[float]] = {phrasing: [] for phrasing in PHRASINGS}
    for name in REPHRASED:
        written = _lines(CORPORA / name / f"{memories}.jsonl")
        first = _lines(CORPORA / name / "memories.jsonl")
        assert [m["id"] for m in written] == [m["id"] for m in first]
        with ChromaMemory(tmp_path / name, embedder=embedder) as memory:
            memory.add(written)
            for phrasing in PHRASINGS:
                probes = _lines(CORPORA / name / f"{phrasing}.jsonl")
                scores[phrasing].append(_mean_mrr(memory, probes))
    means = {phrasing: sum(found) / len(found) for phrasing, found in scores.items()}
    baseline = sum(MEASURED[name] for name in REPHRASED) / len(REPHRASED)
    for phrasing, mean in means.items():
        assert mean >= FLOOR, (memories, phrasing, means)
        assert mean >= baseline - SPREAD, (memories, phrasing, means)


UNSEEN_PHRASINGS = (*PHRASINGS, "probes.still", "probes.command")
UNSEEN_MEASURED = {
    "z5": {
        "memories": {
            "probes": 0.782, "probes.third": 0.827, "probes.name": 0.752,
            "probes.keyword": 0.755, "probes.still": 0.792, "probes.command": 0.791,
        },
        "memories.third": {
            "probes": 0.726, "probes.third": 0.752, "probes.name": 0.723,
            "probes.keyword": 0.771, "probes.still": 0.749, "probes.command": 0.703,
        },
    },
    "z6": {
        "memories": {
            "probes": 0.747, "probes.third": 0.735, "probes.name": 0.715,
            "probes.keyword": 0.736, "probes.still": 0.659, "probes.command": 0.689,
        },
        "memories.third": {
            "probes": 0.648, "probes.third": 0.679, "probes.name": 0.664,
            "probes.keyword": 0.610, "probes.still": 0.615, "probes.command": 0.553,
        },
    },
    "z7": {
        "memories": {
            "probes": 0.840, "probes.third": 0.860, "probes.name": 0.848,
            "probes.keyword": 0.835, "probes.still": 0.846, "probes.command": 0.822,
        },
        "memories.third": {
            "probes": 0.910, "probes.third": 0.940, "probes.name": 0.975,
            "probes.keyword": 0.924, "probes.still": 0.898, "probes.command": 0.948,
        },
    },
}  # fmt: skip
"""The sets written blind after issue 21's rules were final (``z5``, ``z6`` and ``z7``, each by
another writer), six phrasings each (the four above, "still" questions and agent commands) over
first- and third-person memories, and their MRR in each phrasing as first scored (a drop
beyond 0.02 fails the test below)."""


@pytest.mark.parametrize(
    ("name", "memories"),
    [(name, memories) for name in sorted(UNSEEN_MEASURED) for memories in UNSEEN_MEASURED[name]],
)
def test_an_unseen_set_keeps_its_first_scores_and_beats_the_dense_ranking_in_every_phrasing(
    name: str, memories: str, tmp_path: Path, embedder: Embedder
) -> None:
    """Mostly harder than the rephrased sets above (the dense ranking scores 0.09-0.36 on
    them, against 0.64-0.78 on theirs): every phrasing keeps its first score and stays far
    above the dense ranking's."""
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(_lines(CORPORA / name / f"{memories}.jsonl"))
        for phrasing in UNSEEN_PHRASINGS:
            probes = _lines(CORPORA / name / f"{phrasing}.jsonl")
            assert len(probes) == 60
            found = _mean_mrr(memory, probes)
            dense = _mean_mrr(memory, probes, settings=DENSE_RECALL)
            assert found >= UNSEEN_MEASURED[name][memories][phrasing] - 0.02, (phrasing, found)
            assert found >= dense + 0.3, (phrasing, found, dense)
