"""A recall query's validation: every bad field named with its value, unknown keys included."""

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.memory.results import parse_recall_query, recall_query_problems


def test_a_query_names_an_unknown_key_as_not_a_query_field() -> None:
    with pytest.raises(InvalidInputError) as error:
        parse_recall_query({"query": "Where do I live?", "user_id": "alice", "current": "x"})
    assert str(error.value) == (
        "query: current is not a query field (query, user_id, mood_valence), got 'x'"
    )


def test_every_problem_of_a_query_is_listed_where_it_was_found() -> None:
    query, problems = recall_query_problems(
        {"query": " ", "user_id": "alice", "mood": 1}, where="q.jsonl line 3"
    )
    assert query is None and len(problems) == 2
    assert problems[1] == (
        "q.jsonl line 3: mood is not a query field (query, user_id, mood_valence), got 1"
    )
    assert recall_query_problems({"query": "tea", "user_id": "bob"}, where=None)[1] == []
