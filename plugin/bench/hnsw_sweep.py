"""Measure Chroma HNSW recall@k against exact search on real embeddings, with a per-user filter.

Builds a synthetic corpus of templated first-person memories, embeds it with the bundled
all-MiniLM-L6-v2, writes it into fresh embedded collections (one per HNSW setting) and compares
each filtered top-k with exact cosine search over the same user's rows.

    .venv/bin/python -m affect_memory.bench.hnsw_sweep --memories 20000 --users 10 --queries 300
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from typing import Any, cast

import numpy as np

SUBJECTS = [
    "my sister",
    "my brother",
    "my manager",
    "my neighbour",
    "my best friend",
    "my dad",
    "my mum",
    "my partner",
    "my landlord",
    "my dentist",
    "my coach",
    "my colleague Sam",
    "my old roommate",
    "my daughter",
    "my son",
    "my grandmother",
    "the new intern",
    "my cat",
    "my dog",
    "my therapist",
]
VERBS = [
    "told me about",
    "complained about",
    "got excited about",
    "forgot about",
    "asked me about",
    "recommended",
    "argued with me about",
    "laughed about",
    "worried about",
    "planned",
    "cancelled",
    "finally finished",
    "started learning",
    "bought",
    "lost",
]
OBJECTS = [
    "a trip to Lisbon",
    "the marathon in spring",
    "a broken laptop",
    "the tax return",
    "a new job offer",
    "the wedding in June",
    "a pottery class",
    "the flat in Berlin",
    "a guitar",
    "the garden project",
    "a sourdough starter",
    "the car repair",
    "a chess club",
    "the hospital visit",
    "a concert ticket",
    "the birthday party",
    "a vegan cookbook",
    "the mortgage",
    "a kayak",
    "the thesis defence",
    "a podcast about history",
    "the night shift",
    "a puppy",
    "the piano lessons",
    "a climbing gym membership",
]
WHEN = [
    "last week",
    "yesterday",
    "this morning",
    "two years ago",
    "over the weekend",
    "during the holidays",
    "at dinner",
    "on the train",
    "after work",
    "in the rain",
]
FEELINGS = [
    "and I felt happy",
    "and it made me anxious",
    "which annoyed me",
    "and I was relieved",
    "and I could not stop smiling",
    "and I felt a bit lonely",
    "which surprised me",
    "",
]


def corpus(n: int, seed: int) -> list[str]:
    """``n`` distinct templated sentences in a seeded random order."""
    rng = random.Random(seed)
    combos = list(itertools.product(SUBJECTS, VERBS, OBJECTS, WHEN, FEELINGS))
    rng.shuffle(combos)
    if n > len(combos):
        raise SystemExit(f"at most {len(combos)} distinct sentences")
    return [" ".join(part for part in combo if part).strip() + "." for combo in combos[:n]]


def main() -> None:
    """Embed the corpus once, then build and probe one collection per HNSW setting."""
    import chromadb
    from chromadb.config import Settings

    from affect_memory.models.embeddings import default_embedder

    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--settings",
        default="100/100/16,200/200/16,200/200/32,200/500/32",
        help="comma-separated ef_construction/ef_search/max_neighbors triples",
    )
    parser.add_argument("--random", action="store_true", help="random unit vectors (worst case)")
    parser.add_argument("--cache", help="an .npy file to keep the embeddings in between runs")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    total = args.memories + args.queries
    if args.random:
        everything = rng.standard_normal((total, 384)).astype(np.float32)
        everything /= np.linalg.norm(everything, axis=1, keepdims=True)
    elif args.cache and os.path.exists(args.cache):
        everything = np.load(args.cache)
    else:
        everything = default_embedder().embed_documents(corpus(total, args.seed))
        if args.cache:
            np.save(args.cache, everything)
    vectors, queries = everything[: args.memories], everything[args.memories :]
    embed_s = time.perf_counter() - started
    users = rng.integers(0, args.users, size=args.memories)
    query_users = rng.integers(0, args.users, size=args.queries)

    settings = [
        dict(
            zip(
                ("ef_construction", "ef_search", "max_neighbors"),
                map(int, item.split("/")),
                strict=True,
            )
        )
        for item in args.settings.split(",")
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        client = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
        batch = client.get_max_batch_size()
        for index, hnsw in enumerate(settings):
            collection = client.create_collection(
                f"probe-{index}",
                configuration=cast(Any, {"hnsw": {"space": "cosine", **hnsw}}),
                embedding_function=None,
            )
            ids = [f"m{i}" for i in range(args.memories)]
            metas: list[Any] = [{"user_id": f"user-{int(u)}"} for u in users]
            build = time.perf_counter()
            for start in range(0, args.memories, batch):
                stop = start + batch
                collection.add(
                    ids=ids[start:stop], embeddings=vectors[start:stop], metadatas=metas[start:stop]
                )
            build_s = time.perf_counter() - build
            for filtered in (True, False):
                hits, times = [], []
                for q, user in zip(queries, query_users, strict=True):
                    mask = users == user if filtered else np.ones(args.memories, dtype=bool)
                    pool = np.flatnonzero(mask)
                    exact = pool[np.argsort(-(vectors[pool] @ q), kind="stable")[: args.k]]
                    where: Any = {"user_id": f"user-{int(user)}"} if filtered else None
                    tick = time.perf_counter()
                    found = collection.query(
                        query_embeddings=[q], n_results=args.k, where=where, include=[]
                    )["ids"][0]
                    times.append(time.perf_counter() - tick)
                    expected = {f"m{i}" for i in exact}
                    hits.append(len(expected & set(found)) / len(expected))
                rows.append(
                    {
                        **hnsw,
                        "filtered": filtered,
                        "recall_at_k": round(statistics.fmean(hits), 4),
                        "min_recall": round(min(hits), 4),
                        "median_ms": round(statistics.median(times) * 1000, 2),
                        "p95_ms": round(sorted(times)[int(0.95 * len(times))] * 1000, 2),
                        "build_s": round(build_s, 1),
                    }
                )
    report = {
        "memories": args.memories,
        "users": args.users,
        "queries": args.queries,
        "k": args.k,
        "vectors": "random unit" if args.random else "all-MiniLM-L6-v2 over templated memories",
        "embed_s": round(embed_s, 1),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print({key: value for key, value in report.items() if key != "rows"})
        for row in rows:
            print(row)


if __name__ == "__main__":
    main()
