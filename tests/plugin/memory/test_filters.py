"""Recall filters: checked in one line naming the field and value, translated to Chroma's
``where`` and to the index's tags, and applied before ranking, so ``top_k`` matching memories
come back whenever that many exist (SQLite and PostgreSQL indexes, an index written before
the tags, a pool Chroma returned short)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.filters import (
    MemoryFilter,
    metadata_tags,
    parse_where,
    value_key,
)
from affect_memory.memory.index.lexical.search import FilteredMembers
from affect_memory.memory.index.storage.schema import FIELDS_LEVEL
from affect_memory.memory.recall.pool import QueryPool, with_filtered
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.plugin.state.postgres_fixture import require_psycopg, server_url, temporary_schema

NOW = "2026-06-01T12:00:00Z"
QUERY = "What do I know about the bees in my garden?"

GARDEN = (
    "The bees in my garden swarmed around the lavender this morning.",
    "I put a new beehive at the end of the garden for the bees.",
    "My garden bees made twelve jars of honey this summer.",
    "The bees in the garden love the apple blossom.",
    "I watched the garden bees drink from the bird bath.",
)
ELSEWHERE = (
    "I bought a new bicycle with a blue frame.",
    "The quarterly report is due on Friday, and it mentions bees once.",
    "My sister moved to Porto in March.",
    "I started learning the cello.",
)


def corpus() -> list[dict[str, Any]]:
    """Ann's memories: 40 of agent y about her garden bees, 4 of agent x about other things
    (one mentions bees), so x's would never reach the top of a question about the bees."""
    records: list[dict[str, Any]] = []
    for i in range(40):
        records.append(
            {
                "id": f"y{i}",
                "text": f"{GARDEN[i % len(GARDEN)]} (note {i})",
                "user_id": "ann",
                "agent_id": "y",
                "conversation_id": f"c{i % 2}",
                "timestamp": f"2026-05-{1 + i % 28:02d}T08:00:00Z",
                "extra": {"project": "home", "weight": i % 3},
            }
        )
    for i, text in enumerate(ELSEWHERE):
        records.append(
            {
                "id": f"x{i}",
                "text": text,
                "user_id": "ann",
                "agent_id": "x",
                "conversation_id": "c9",
                "timestamp": f"2026-04-{10 + i:02d}T08:00:00Z",
                "extra": {"project": "work" if i < 2 else "family", "weight": 1.0},
            }
        )
    records.append(  # no agent, no extra: meets no filter but an unfiltered recall
        {"id": "n0", "text": "The bees in my garden are calm today.", "user_id": "ann",
         "timestamp": "2026-05-30T08:00:00Z"}
    )
    return records


@pytest.fixture(params=["sqlite", "postgresql"])
def memory(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> Iterator[ChromaMemory]:
    """Ann's corpus in an embedded store, its index in SQLite or PostgreSQL."""
    with ExitStack() as stack:
        index: str | None = None
        if request.param == "postgresql":
            require_psycopg()
            url = server_url()
            index = f"{url}?schema={stack.enter_context(temporary_schema(url))}"
        opened = stack.enter_context(
            ChromaMemory(tmp_path / "chroma", embedder=embedder, index=index)
        )
        opened.add(corpus())
        yield opened


def ids(memory: ChromaMemory, **options: Any) -> list[str]:
    """The ids ``recall`` returns for the bee question."""
    return [hit.id for hit in memory.recall(QUERY, "ann", now=NOW, **options).results]


# ---------------------------------------------------------------- recall


def test_an_agent_filter_returns_top_k_of_that_agents_memories_only(memory: ChromaMemory) -> None:
    assert not any(ident.startswith("x") for ident in ids(memory, top_k=10))  # a minority
    assert sorted(ids(memory, top_k=3, where={"agent_id": "x"})) != []
    found = ids(memory, top_k=3, where={"agent_id": "x"})
    assert len(found) == 3 and all(ident.startswith("x") for ident in found)
    assert sorted(ids(memory, top_k=10, where={"agent_id": "x"})) == ["x0", "x1", "x2", "x3"]
    assert ids(memory, top_k=10, where={"agent_id": {"$eq": "x"}}) == ids(
        memory, top_k=10, where={"agent_id": "x"}
    )
    assert ids(memory, top_k=5, where={"agent_id": "nobody"}) == []


def test_in_conversation_and_extra_filters_keep_only_what_meets_them(
    memory: ChromaMemory,
) -> None:
    both = ids(memory, top_k=50, where={"agent_id": {"$in": ["x", "z"]}})
    assert sorted(both) == ["x0", "x1", "x2", "x3"]
    work = ids(memory, top_k=50, where={"extra.project": "work"})
    assert sorted(work) == ["x0", "x1"]
    family = ids(memory, top_k=50, where={"extra.project": {"$in": ["family", "nowhere"]}})
    assert sorted(family) == ["x2", "x3"]
    conversation = ids(memory, top_k=50, where={"conversation_id": "c1"})
    assert sorted(conversation) == sorted(f"y{i}" for i in range(1, 40, 2))
    anded = ids(memory, top_k=50, where={"agent_id": "y", "extra.weight": 2})
    assert sorted(anded) == sorted(f"y{i}" for i in range(40) if i % 3 == 2)
    # numbers compare by value, as in Chroma: x's weight is the float 1.0
    assert sorted(ids(memory, top_k=50, where={"agent_id": "x", "extra.weight": 1})) == [
        "x0", "x1", "x2", "x3"
    ]
    assert ids(memory, top_k=50, where={"extra.weight": True}) == []  # a bool is not 1


def test_recall_many_filters_every_query(memory: ChromaMemory) -> None:
    results = memory.recall_many(
        [{"query": QUERY, "user_id": "ann"}, {"query": "my bicycle", "user_id": "ann"}],
        now=NOW,
        top_k=2,
        where={"agent_id": "x"},
    )
    assert [len(result.results) for result in results] == [2, 2]
    assert all(hit.id.startswith("x") for result in results for hit in result.results)
    assert results[1].results[0].id == "x0"


def test_the_lexical_search_ranks_only_the_memories_meeting_the_filter(
    memory: ChromaMemory,
) -> None:
    unfiltered = memory.index.lexical_search("ann", "garden bees", 5)
    assert "x1" not in unfiltered.ids  # 42 memories hold "bees": x's one is not in the top 5
    where = parse_where({"agent_id": "x"})
    only_x = memory.index.lexical_search("ann", "garden bees", 5, where=where)
    assert only_x.ids == ["x1"]
    assert only_x.idf_total == unfiltered.idf_total  # BM25's statistics stay the user's
    whole = memory.index.lexical_search("ann", "garden bees", 100)
    assert only_x.scores[0] == whole.scores[whole.ids.index("x1")]


def test_an_index_written_before_the_tags_is_tagged_by_the_next_backfill(
    tmp_path: Path, embedder: Embedder
) -> None:
    chroma, index = tmp_path / "chroma", str(tmp_path / "index.sqlite3")
    where = parse_where({"agent_id": "x"})
    assert where is not None
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        memory.add(corpus())
        expected = ids(memory, top_k=3, where=where)

        def before_migration_5(tx: Any) -> None:
            tx.run("DELETE FROM index_tags")
            tx.run("UPDATE index_docs SET tagged = NULL")
            tx.run("UPDATE index_users SET ranked_fields = 1")

        memory.index.backend.write(before_migration_5)
        assert memory.index.lexical_search("ann", "bees", 5, where=where).ids == []  # untagged
        assert all(ident.startswith("x") for ident in ids(memory, top_k=3, where=where))
    with ChromaMemory(chroma, embedder=embedder, index=index) as memory:
        assert memory.index.lexical_search("ann", "bees", 5, where=where).ids == ["x1"]
        assert ids(memory, top_k=3, where=where) == expected
        level = memory.index.backend.read(
            lambda tx: tx.one("SELECT ranked_fields FROM index_users")
        )
        assert level == (FIELDS_LEVEL,) == (2,)


def test_an_upsert_and_a_forget_keep_the_tags_in_step(tmp_path: Path, embedder: Embedder) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(corpus())
        moved = {**corpus()[0], "agent_id": "x"}  # y0 now belongs to x
        memory.upsert([moved])
        assert "y0" in ids(memory, top_k=10, where={"agent_id": "x"})
        assert "y0" not in ids(memory, top_k=50, where={"agent_id": "y"})
        memory.forget(["x1"], user_id="ann")
        lexical = memory.index.lexical_search(
            "ann", "bees", 5, where=parse_where({"agent_id": "x"})
        )
        assert "x1" not in lexical.ids
        tags = memory.index.backend.read(
            lambda tx: tx.rows("SELECT COUNT(*) FROM index_tags t LEFT JOIN index_docs d "
                               "ON d.user_key = t.user_key AND d.doc_key = t.doc_key "
                               "WHERE d.doc_key IS NULL")
        )
        assert tags == [(0,)]  # no tag outlives its memory


# ---------------------------------------------------------------- checking


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ({"agent": "x"}, r"unknown field 'agent' = 'x'"),
        ({"project": "p"}, r"unknown field 'project' = 'p'.*extra\.KEY"),
        ({"extra": {"project": "p"}}, r"unknown field 'extra' = \{'project': 'p'\}.*extra\.KEY"),
        ({"agent_id": {"$ne": "x"}}, r"agent_id has unknown operator '\$ne'"),
        ({"agent_id": {"$in": "x"}}, r"agent_id \$in takes a list, got 'x'"),
        ({"agent_id": {"$in": []}}, r"agent_id \$in takes 1-256 values"),
        ({"agent_id": ["x", "y"]}, r"agent_id must be compared with a string.*\['x', 'y'\]"),
        ({"agent_id": 3}, r"agent_id must be compared with a string.*got 3"),
        ({"extra.project": None}, r"extra\.project must be compared with a str.*got None"),
        ({"extra.project": {"a": 1, "b": 2}}, r"extra\.project needs exactly one operator"),
        ({"extra.n": float("nan")}, r"extra\.n value must be finite, got nan"),
        ({"extra.n": {"$in": [1, 2.5]}}, r"extra\.n \$in values must all be of one type"),
        ({"extra.user_id": "a"}, r"'extra\.user_id' names a reserved key"),
        ({"$or": [{"agent_id": "x"}]}, r"unknown field '\$or'"),
        (["agent_id"], r"where must be a mapping"),
    ],
)
def test_a_bad_filter_is_one_line_naming_the_field_and_value(where: Any, named: str) -> None:
    with pytest.raises(InvalidInputError, match=named) as raised:
        parse_where(where)
    assert "\n" not in str(raised.value)


def test_recall_refuses_a_bad_filter_before_reading(tmp_path: Path, embedder: Embedder) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        with pytest.raises(InvalidInputError, match=r"unknown field 'agentid' = 'x'"):
            memory.recall(QUERY, "ann", where={"agentid": "x"})
        assert memory.count() == 0


def test_a_filter_translates_to_one_chroma_where() -> None:
    assert parse_where(None) is None and parse_where({}) is None
    one = parse_where({"agent_id": "x"})
    assert isinstance(one, MemoryFilter) and one.chroma_where() == {"agent_id": {"$eq": "x"}}
    two = parse_where({"agent_id": {"$in": ["x", "y", "x"]}, "extra.project": "p"})
    assert two is not None and two.chroma_where() == {
        "$and": [{"agent_id": {"$in": ["x", "y"]}}, {"project": {"$eq": "p"}}]
    }
    assert two.accepts({"agent_id": "y", "project": "p"})
    assert not two.accepts({"agent_id": "y", "project": "q"})


def test_value_keys_compare_as_chroma_does() -> None:
    assert value_key(1) == value_key(1.0) == value_key(-0.0 + 1)
    assert value_key(0) == value_key(-0.0)
    assert value_key(True) != value_key(1) and value_key("1") != value_key(1)
    assert value_key(1.5) != value_key(1)
    tags = dict(metadata_tags({"agent_id": "x", "user_id": "ann", "timestamp": "t", "p": "q"}))
    assert set(tags) == {"agent_id", "p"}  # the plugin's own keys are not filterable


# ---------------------------------------------------------------- a short pool


def test_a_pool_chroma_returned_short_is_topped_up_with_the_nearest_members() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    query = vectors[0].astype(np.float64)
    pool = QueryPool(["a"], np.array([0.0]))
    members = FilteredMembers(
        6,
        ["b", "c", "d", "e", "f"],
        [vectors[i].tobytes() for i in range(1, 5)] + [None],
    )
    asked: list[list[str]] = []

    def read_missing(wanted: list[str]) -> dict[str, Any]:
        asked.append(wanted)
        return {"ids": wanted, "embeddings": [vectors[5]]}

    topped = with_filtered(pool, members, query, read_missing, 4)
    assert asked == [["f"]]
    cosine = {
        name: float(vectors[i] @ query / np.linalg.norm(vectors[i]) / np.linalg.norm(query))
        for i, name in enumerate("abcdef")
    }
    nearest = sorted("bcdef", key=lambda name: -cosine[name])[:3]
    assert topped.ids == ["a", *nearest]
    assert np.allclose(topped.distances[1:], [1 - cosine[name] for name in nearest])
    assert with_filtered(pool, FilteredMembers(1), query, read_missing, 4) is pool
