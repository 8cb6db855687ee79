"""The postings cache never changes a result: after any mix of adds, new texts, forgets,
re-indexing and resets, by this or another writer, a cached search returns the same ids and
the same score bits as an uncached one, also once the change log no longer reaches back or
the cache is too small to hold a query's terms, whether it holds a user whole or term by term.
A pool search reads what a search and a rehearsal read apart."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from affect_memory.memory.index.consistency import documents
from affect_memory.memory.index.consistency.documents import (
    IndexedDoc,
    RankedFields,
    ensure_user,
    put_docs,
    remove_docs,
)
from affect_memory.memory.index.consistency.journal import announce
from affect_memory.memory.index.consistency.rehearsal import read_rehearsal
from affect_memory.memory.index.lexical.search import PostingsCache, search, search_pool
from affect_memory.memory.index.storage.backend import Backend
from affect_memory.memory.index.storage.opening import IndexTarget, open_backend
from tests.plugin.state.postgres_fixture import server_url, temporary_schema

WORDS = (
    "bees",
    "garden",
    "roof",
    "sister",
    "piano",
    "lisbon",
    "berlin",
    "coffee",
    "river",
    "cat",
    "school",
    "painting",
)
KEY = 7


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        opened = open_backend(IndexTarget("file", path=tmp_path / "i.sqlite3"), lock_timeout=5)
    else:
        url = server_url()
        with temporary_schema(url) as schema:
            opened = open_backend(IndexTarget("postgresql", url=url, schema=schema), lock_timeout=5)
            try:
                yield opened
            finally:
                opened.close()
            return
    try:
        yield opened
    finally:
        opened.close()


def _doc(ident: str, rng: random.Random) -> IndexedDoc:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
    return IndexedDoc(ident, text, 1.0, 0, None, None, True, None)


def _same(backend: Backend, caches: list[PostingsCache], query: str) -> None:
    plain = backend.read(lambda tx: search(tx, KEY, query, 15, k1=1.2, b=0.75))
    for cache in caches:
        cached = backend.read(
            lambda tx, cache=cache: search(tx, KEY, query, 15, cache, k1=1.2, b=0.75)
        )
        assert cached.ids == plain.ids, query
        assert cached.scores.tolist() == plain.scores.tolist(), query  # the same bits


def test_cached_searches_equal_uncached_through_every_kind_of_change(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(documents, "CHANGES_KEPT", 30)  # the log is pruned during the run
    rng = random.Random(5)
    backend.write(lambda tx: ensure_user(tx, KEY, "memories.ann.x", "c1", "ann"))
    # warm holds the user whole, by_term term by term, tiny cannot hold one query's terms.
    warm, tiny, lagging = PostingsCache(), PostingsCache(capacity=40), PostingsCache()
    by_term = PostingsCache(whole_users=False)
    ids = [f"m{i}" for i in range(40)]
    for step in range(260):
        kind = rng.random()
        if kind < 0.45:
            docs = [_doc(rng.choice(ids), rng) for _ in range(rng.randint(1, 5))]
            backend.write(lambda tx, docs=docs: put_docs(tx, KEY, docs))
        elif kind < 0.7:
            gone = rng.sample(ids, rng.randint(1, 4))
            backend.write(lambda tx, gone=gone: remove_docs(tx, KEY, gone))
        elif kind < 0.72:
            docs = [_doc(ident, rng) for ident in ids[:10]]
            backend.write(lambda tx, docs=docs: put_docs(tx, KEY, docs, rebuild=True))
        elif kind < 0.73:
            recreated = f"c{step}"  # the collection was recreated: the user starts over
            backend.write(
                lambda tx, new=recreated: ensure_user(tx, KEY, "memories.ann.x", new, "ann")
            )
        query = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
        _same(backend, [warm, by_term, tiny] + ([lagging] if step % 97 == 0 else []), query)


def _ranked_doc(ident: str, rng: random.Random) -> IndexedDoc:
    """A memory with every ranked field and an embedding, as recall reads it."""
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
    fields = RankedFields("ann", f"2026-01-{rng.randint(1, 28):02d}T00:00:00+00:00",
                          rng.random(), rng.uniform(-1, 1), rng.random() < 0.5)  # fmt: skip
    vector = np.asarray([rng.random() for _ in range(4)], dtype="<f4").tobytes()
    return IndexedDoc(
        ident, text, float(rng.randint(0, 10**9)), rng.randint(0, 3), None, None, True, fields,
        embedding=vector,
    )  # fmt: skip


@pytest.mark.parametrize("embeddings", [False, True])
def test_a_pool_search_reads_in_one_snapshot_what_a_search_and_a_rehearsal_read(
    backend: Backend, embeddings: bool
) -> None:
    """The hits, their scores, the absent hits' embeddings (None for one in flight) and the
    rehearsal of every member equal a search's and a by-id read's, which read each row twice."""
    rng = random.Random(11)
    backend.write(lambda tx: ensure_user(tx, KEY, "memories.ann.x", "c1", "ann"))
    docs = [_ranked_doc(f"m{i:02d}", rng) for i in range(40)]
    backend.write(lambda tx: put_docs(tx, KEY, docs))
    backend.write(lambda tx: announce(tx, KEY, "write", [("m03", {})], due=0.0))
    known = ["m01", "m02", "m03", "m05", "gone"]  # "gone": a dense id the index lacks
    for query in ("bees garden", "river cat school", "piano", "nothing matches"):
        pooled = backend.read(
            lambda tx, q=query: search_pool(
                tx, KEY, q, 12, PostingsCache(), known, k1=1.2, b=0.75, embeddings=embeddings
            )
        )
        apart = backend.read(
            lambda tx, q=query: search(tx, KEY, q, 12, known=set(known), k1=1.2, b=0.75)
        )
        assert pooled.hits.ids == apart.ids
        assert pooled.hits.scores.tolist() == apart.scores.tolist()
        assert (pooled.hits.absent, pooled.hits.vectors) == (apart.absent, apart.vectors)
        members = [*known, *(ident for ident in apart.ids if ident not in known)]
        got = pooled.rehearsal(members)
        want = backend.read(
            lambda tx, m=members: read_rehearsal(tx, KEY, m, fields=True, embeddings=embeddings)
        )
        assert got is not None and want.ranked is not None and got.ranked is not None
        assert got.recall_counts.tolist() == want.recall_counts.tolist()
        assert got.found.tolist() == want.found.tolist()
        np.testing.assert_array_equal(got.epochs, want.epochs)
        np.testing.assert_array_equal(got.last_recalled, want.last_recalled)
        assert got.last_recalled_at == want.last_recalled_at
        for name in ("known", "significance", "emotional_valence", "episodes"):
            np.testing.assert_array_equal(getattr(got.ranked, name), getattr(want.ranked, name))
        assert (got.ranked.texts, got.ranked.timestamps) == (
            want.ranked.texts, want.ranked.timestamps
        )  # fmt: skip
        assert got.ranked.embeddings == want.ranked.embeddings
        if embeddings:
            assert got.ranked.embeddings is not None and got.ranked.embeddings[2] is None  # m03
        assert pooled.rehearsal([*members, "never asked"]) is None


def test_a_pool_search_without_the_candidates_rows_reads_only_the_hits_rows(
    backend: Backend,
) -> None:
    """What an event query reads with its search: the hits' rows, placed among the pool's
    members as a read of those ids would read them; the other candidates' are left to later."""
    rng = random.Random(5)
    backend.write(lambda tx: ensure_user(tx, KEY, "memories.ann.x", "c1", "ann"))
    backend.write(lambda tx: put_docs(tx, KEY, [_ranked_doc(f"m{i:02d}", rng) for i in range(40)]))
    known = ["m01", "m02", "m03", "m05", "gone"]
    for query in ("bees garden", "river cat school", "nothing matches"):
        pooled = backend.read(
            lambda tx, q=query: search_pool(
                tx, KEY, q, 12, PostingsCache(), known, k1=1.2, b=0.75, candidate_rows=False
            )
        )
        hits = list(pooled.hits.ids)
        assert set(pooled.rows) == set(hits) and pooled.asked == frozenset(hits)
        members = [*known, *(ident for ident in hits if ident not in known)]
        at, got = pooled.held(members)
        assert [members[index] for index in at] == [m for m in members if m in hits]
        want = backend.read(
            lambda tx, h=[members[index] for index in at]: read_rehearsal(tx, KEY, h, fields=True)
        )
        assert got.recall_counts.tolist() == want.recall_counts.tolist()
        np.testing.assert_array_equal(got.epochs, want.epochs)
        assert got.ranked is not None and want.ranked is not None
        assert got.ranked.texts == want.ranked.texts
        assert pooled.rehearsal(members) is None  # "gone" and the candidates were not read
