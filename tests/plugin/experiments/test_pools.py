"""Labelled pools from recall itself, and fitted weights that rank the same at every door.

Weights fitted on recall's own pools are written as a settings file; ``affect-memory recall
--weights FILE`` and an ``AffectEngine`` whose retriever reads the same file rank every probe
identically.
"""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.cli.demo import SAMPLE_MEMORIES
from affect_memory.experiments import PoolQuery, fit_weights, label_pools, labelled_pool
from affect_memory.kernel import AffectEngine, EngineRetrieval, GateResult, RetrievalWeights
from affect_memory.kernel.adapters import InMemoryStateStore, ScriptedModel
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.settings import load_recall_settings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = SAMPLE_MEMORIES
PROBES = ROOT / "fixtures" / "sample_memories.probes.jsonl"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _probes() -> list[dict[str, str]]:
    return [json.loads(line) for line in PROBES.read_text().splitlines() if line.strip()]


def _queries() -> list[PoolQuery]:
    return [
        PoolQuery(p["query"], p["user_id"], (p["current"],)) for p in _probes()
    ] + [
        PoolQuery("What do I do for work?", "alice", ("alice-job-new", "alice-job-old")),
    ]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """A data directory holding the sample corpus, as the CLI reads it."""
    data = tmp_path_factory.mktemp("fitted") / "home"
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    with ChromaMemory(data / "chroma", embedder=embedder) as memory:
        memory.add(records, progress=False)
    return data


def test_pools_are_labelled_with_the_answers_they_hold(data_dir: Path, embedder: Embedder) -> None:
    with ChromaMemory(data_dir / "chroma", embedder=embedder) as memory:
        pools = label_pools(memory, _queries(), now=NOW)
        missing = label_pools(memory, [PoolQuery("tea", "alice", ("no-such-memory",))], now=NOW)
    assert len(pools.queries) == len(_queries()) and pools.coverage == 1.0
    several = pools.queries[-1]
    assert len(several.targets) == 2 and several.user_id == "alice"
    assert (missing.queries, missing.dropped, missing.labels_outside) == ((), 1, 1)
    with pytest.raises(InvalidInputError, match="relevant_ids must name at least one"):
        PoolQuery("tea", "alice", ())


def test_a_pool_without_the_rules_ages_is_refused() -> None:
    from affect_memory.kernel import MemoryCandidate

    bare = (MemoryCandidate(id="a", text="x", distance=0.5),)
    with pytest.raises(InvalidInputError, match="carries no age_days"):
        labelled_pool(bare, PoolQuery("q", "u", ("a",)))


def _cli_ranking(data_dir: Path, weights: Path, probe: dict[str, str]) -> list[tuple[str, float]]:
    out = io.StringIO()
    argv = ["recall", probe["query"], "--user-id", probe["user_id"], "--now", NOW.isoformat(),
            "--json", "--weights", str(weights), "--data-dir", str(data_dir)]  # fmt: skip
    with redirect_stdout(out):
        assert main(argv) == 0
    return [(hit["id"], hit["score"]) for hit in json.loads(out.getvalue())["results"]]


def test_fitted_weights_rank_alike_through_recall_weights_and_the_engine(
    data_dir: Path, embedder: Embedder, tmp_path: Path
) -> None:
    path = tmp_path / "fitted.json"
    with ChromaMemory(data_dir / "chroma", embedder=embedder) as memory:
        pools = label_pools(memory, _queries(), now=NOW)
    # Start from nearly no recency, so the fit has something to find (and the check bites).
    start = RetrievalWeights(recency_horizon_days=120.0, recency_floor=0.9)
    fitted = fit_weights(pools, seed=0, validation_fraction=0.34, start=start, settings_path=path)
    assert fitted.n_validation_users == 1 and fitted.labels_outside == 0
    assert fitted.weights != start and fitted.weights.recency_floor < 0.9
    settings = load_recall_settings(path)
    assert settings.weights == fitted.weights

    through_cli = {(p["query"], p["user_id"]): _cli_ranking(data_dir, path, p) for p in _probes()}
    with ChromaMemory(data_dir / "chroma", embedder=embedder) as memory:
        for probe in _probes():
            for explicit in (None, settings.weights):
                engine = AffectEngine(
                    model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
                    store=InMemoryStateStore(),
                    conversation_id="c",
                    retriever=memory.retriever_for(probe["user_id"], settings=settings),
                    clock=lambda: NOW,
                    retrieval=EngineRetrieval(weights=explicit),
                )
                assert engine.weights == fitted.weights
                turn = asyncio.run(engine.turn(probe["query"]))
                ranked = [(m.candidate.id, m.score) for m in turn.memories]
                expected = through_cli[probe["query"], probe["user_id"]]
                assert [ident for ident, _ in ranked] == [ident for ident, _ in expected]
                assert [score for _, score in ranked] == pytest.approx(
                    [score for _, score in expected], abs=1e-12
                )
