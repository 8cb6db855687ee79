"""Fitting a rule's setting through recall itself: held out by user, and the fitted file ranks
alike through ``recall --weights``, ``recall`` and an engine turn."""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.experiments import PoolQuery, fit_settings, split_users
from affect_memory.kernel import AffectEngine, GateResult
from affect_memory.kernel.adapters import InMemoryStateStore, ScriptedModel
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.settings import RecallSettings, load_recall_settings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "stale_current" / "x"


def _lines(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (CORPUS / name).read_text().splitlines() if line]


def _queries() -> list[PoolQuery]:
    return [
        PoolQuery(str(p["query"]), str(p["user_id"]), (str(p["current"]),))
        for p in _lines("probes.jsonl")
    ]


def test_users_are_split_whole_and_a_bad_search_is_refused() -> None:
    train, validation = split_users(_queries(), validation_fraction=0.3, seed=0)
    assert {q.user_id for q in train}.isdisjoint({q.user_id for q in validation})
    assert len(train) + len(validation) == 60 and validation
    with pytest.raises(InvalidInputError, match="not a numeric RecallSettings field"):
        fit_settings(None, _queries(), now=NOW, search={"ranking": [1.0]})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="anchor_members takes whole numbers"):
        fit_settings(None, _queries(), now=NOW, search={"anchor_members": [2.5]})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="search grid for 'topic_weight'"):
        fit_settings(None, _queries(), now=NOW, search={"topic_weight": [-1.0]})  # type: ignore[arg-type]


def test_a_fitted_rule_weight_ranks_alike_through_the_file_the_cli_and_the_engine(
    tmp_path: Path, embedder: Embedder
) -> None:
    data = tmp_path / "home"
    path = tmp_path / "fitted.json"
    start = RecallSettings(topic_weight=0.0)  # the topic term off: the fit has one to find
    with ChromaMemory(data / "chroma", embedder=embedder) as memory:
        memory.add(_lines("memories.jsonl"), progress=False)
        fit = fit_settings(
            memory,
            _queries(),
            now=NOW,
            search={"topic_weight": (0.0, 0.15, 0.3, 0.6)},
            start=start,
            settings_path=path,
        )
        assert fit.settings.topic_weight > 0.0 and fit.train_mrr > fit.start_train_mrr
        assert set(fit.train_users).isdisjoint(fit.validation_users)
        low, high = fit.gain_interval
        assert low <= fit.gain <= high
        settings = load_recall_settings(path)
        assert settings == fit.settings
        probes = _lines("probes.jsonl")[:6]
        direct = {
            str(p["query"]): memory.recall(
                str(p["query"]), str(p["user_id"]), now=NOW, top_k=6, settings=settings
            ).results
            for p in probes
        }
        for probe in probes:
            engine = AffectEngine(
                model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
                store=InMemoryStateStore(),
                conversation_id="c",
                retriever=memory.retriever_for(str(probe["user_id"]), settings=settings),
                clock=lambda: NOW,
            )
            turn = asyncio.run(engine.turn(str(probe["query"])))
            expected = [(hit.id, hit.score) for hit in direct[str(probe["query"])]]
            assert [(m.candidate.id, m.score) for m in turn.memories] == expected
    for probe in probes:
        out = io.StringIO()
        argv = ["recall", str(probe["query"]), "--user-id", str(probe["user_id"]),
                "--now", NOW.isoformat(), "--json", "--top", "6", "--weights", str(path),
                "--data-dir", str(data)]  # fmt: skip
        with redirect_stdout(out):
            assert main(argv) == 0
        through_cli = [(hit["id"], hit["score"]) for hit in json.loads(out.getvalue())["results"]]
        expected = [(hit.id, hit.score) for hit in direct[str(probe["query"])]]
        assert [ident for ident, _ in through_cli] == [ident for ident, _ in expected]
        assert [score for _, score in through_cli] == pytest.approx(
            [score for _, score in expected], abs=1e-9
        )
