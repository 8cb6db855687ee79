"""``affect-memory recall``: the ranked memories for a query, with every score factor."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from affect_memory.cli.store_options import add_store_arguments, open_memory
from affect_memory.jsonl import loads_strict, read_jsonl

__all__ = ["register", "run"]

_TEXT_WIDTH = 60


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``recall`` sub-command."""
    parser = commands.add_parser(
        "recall",
        help="rank a user's memories for a query (read-only)",
        description=(
            "Pool the user's memories nearest to the query in Chroma (CANDIDATES of them) "
            "with the lexical index's best BM25 matches, fuse the two relevances, age each "
            "memory by the query's time rule, and rank with the kernel (similarity x recency "
            "x salience + episode bonus, x mood congruence). Read-only: recall counts are not "
            "changed. With --queries, read one "
            '{"query", "user_id", "mood_valence"?} object per line and print one JSON result '
            "per line, loading the model once and embedding the queries in one batch (other "
            'keys of a line, such as a probe\'s "current" and "stale" ids, are not used and come '
            'back as the result\'s "labels"): scores '
            "then agree with one-query recall within 1e-6, and the order too except between "
            "results that close. In --json output 'episode' is the episode bonus added to the "
            "score, 'relevance' what the similarity was made of, 'age_days' the age recency "
            "was scored at and 'time_rule' why, and 'skipped' lists stored rows too malformed "
            "to score."
        ),
    )
    parser.add_argument("query", nargs="?", metavar="QUERY", help="the query text")
    parser.add_argument("--queries", type=Path, metavar="FILE.jsonl", help="batch of queries")
    parser.add_argument("--user-id", help="whose memories to search (required with QUERY)")
    parser.add_argument(
        "--mood-valence",
        type=float,
        default=None,
        metavar="V",
        help="mood valence in [-1, 1] (default 0)",
    )
    parser.add_argument(
        "--now", metavar="ISO", help="the instant to score recency at (zoned; default now)"
    )
    parser.add_argument("--top", type=int, default=6, metavar="K", help="results (default 6)")
    parser.add_argument(
        "--candidates",
        type=int,
        default=None,
        metavar="N",
        help=(
            "Chroma's nearest memories in each query's pool, at most 1,024 (default 128, or "
            "the --weights file's dense_candidates; in a larger store, a question about a "
            "period, a former or a current state takes at most dated_dense_candidates of "
            "them, default 64); at least --top are fetched"
        ),
    )
    parser.add_argument(
        "--weights",
        type=Path,
        metavar="FILE.json",
        help=(
            "ranking settings: a JSON object of RetrievalWeights fields and recall settings "
            "(dense_candidates, lexical_candidates, lexical_weight, ranking), as fit_weights "
            "writes it; fields it leaves out keep the defaults"
        ),
    )
    parser.add_argument(
        "--where",
        metavar="JSON",
        help=(
            'recall only memories meeting a filter, a JSON object such as \'{"agent_id": "x"}\', '
            '\'{"conversation_id": {"$in": ["c1", "c2"]}}\' or \'{"extra.project": "p"}\' '
            "(fields agent_id, conversation_id, extra.KEY; operators $eq, $in; all must hold); "
            "applied before ranking, so --top matching memories come back when they exist"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_store_arguments(parser)
    parser.set_defaults(handler=run)


def _batch(path: Path) -> tuple[list[Any], list[dict[str, Any]]]:
    """The queries of a ``--queries`` file, and each line's labels: its keys that are not
    query fields (a probe's "current" and "stale" ids), echoed with its result."""
    from affect_memory.kernel.errors import InvalidInputError
    from affect_memory.memory.problems import problems_message
    from affect_memory.memory.results import RecallQuery, collect_recall_queries

    problems: list[str] = []
    labels: list[dict[str, Any]] = []

    def entries() -> Iterator[tuple[object, str]]:
        for number, value in read_jsonl(path, error=InvalidInputError, problems=problems):
            extra: dict[str, Any] = {}
            if isinstance(value, dict):
                extra = {k: v for k, v in value.items() if k not in RecallQuery.model_fields}
                value = {k: v for k, v in value.items() if k in RecallQuery.model_fields}
            labels.append(extra)
            yield value, f"{path} line {number}"

    queries = collect_recall_queries(entries(), problems)
    if problems:
        raise InvalidInputError(problems_message(problems))
    if not labels:
        raise InvalidInputError(f"{path}: no queries (expected one JSON object per line)")
    return queries, labels


def _where(text: str | None) -> Any:
    """The ``--where`` filter, checked before the store opens (a bad one: one line)."""
    from affect_memory.kernel.errors import InvalidInputError
    from affect_memory.memory.filters import parse_where

    if text is None:
        return None
    try:
        value = loads_strict(text)
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            f"--where must be a JSON object like '{{\"agent_id\": \"x\"}}': {error.msg} at "
            f"character {error.pos}"
        ) from None
    except ValueError as error:  # a repeated key, NaN, too deep, a number too long
        raise InvalidInputError(f"--where: invalid JSON: {error}") from None
    try:
        return parse_where(value)
    except InvalidInputError as error:
        raise InvalidInputError(f"--{error}") from None


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _TEXT_WIDTH else flat[: _TEXT_WIDTH - 3] + "..."


def _print_table(result: Any) -> None:
    from affect_memory.formatting import format_table

    print(f"{result.query!r} for {result.user_id} at {result.now}")
    if not result.results:
        print("(no memories for this user)")
        return
    rows = [
        [
            rank,
            hit.score,
            hit.distance,
            hit.similarity,
            hit.recency,
            hit.age_days if hit.age_days is not None else "",
            hit.salience,
            hit.congruence,
            hit.episode,
            (hit.timestamp or "")[:10],
            hit.id,
            _short(hit.text),
        ]
        for rank, hit in enumerate(result.results, start=1)
    ]
    headers = ["#", "score", "dist", "sim", "recency", "age", "salience", "congr", "episode"]
    print(format_table([*headers, "date", "id", "text"], rows))
    print(f"time rule of #1: {result.results[0].time_rule}")


def run(args: argparse.Namespace) -> int:
    """Recall one query (table or JSON) or a batch (JSON lines)."""
    from affect_memory.kernel.errors import InvalidInputError
    from affect_memory.memory.settings import load_recall_settings
    from affect_memory.memory.timestamps import normalize_timestamp

    if (args.query is None) == (args.queries is None):
        raise InvalidInputError("give either QUERY (with --user-id) or --queries FILE.jsonl")
    if args.query is not None and not args.user_id:
        raise InvalidInputError("--user-id is required with QUERY: every recall is per user")
    if args.queries is not None and (args.user_id or args.mood_valence is not None):
        raise InvalidInputError(
            "--user-id and --mood-valence go inside each line of --queries, not beside it"
        )
    now = normalize_timestamp(args.now, field="--now").moment if args.now else None
    where = _where(args.where)
    labels: list[dict[str, Any]] = []
    if args.queries is not None:
        queries, labels = _batch(args.queries)
    else:
        queries = [
            {
                "query": args.query,
                "user_id": args.user_id,
                "mood_valence": 0.0 if args.mood_valence is None else args.mood_valence,
            }
        ]
    try:
        settings = load_recall_settings(args.weights) if args.weights is not None else None
    except InvalidInputError as error:
        raise InvalidInputError(f"--weights {error}") from None
    with open_memory(args, create=False) as memory:
        results = memory.recall_many(
            queries,
            now=now,
            top_k=args.top,
            candidates=args.candidates,
            settings=settings,
            where=where,
        )
    if args.queries is not None or args.json:
        for index, result in enumerate(results):
            line = result.to_json()
            if index < len(labels) and labels[index]:
                line["labels"] = labels[index]
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
    else:
        _print_table(results[0])
    return 0
