"""MemoryRecord: what is accepted, what is refused, and what reaches Chroma's metadata."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from affect_memory.errors import RecordError, TimestampError
from affect_memory.memory.batches import parse_record, validate_records
from affect_memory.memory.records import RESERVED_KEYS, MemoryRecord

BASE: dict[str, Any] = {
    "id": "m1",
    "text": "I moved to Berlin.",
    "user_id": "ann",
    "timestamp": "2026-05-29T14:00:00+02:00",
}


def test_defaults_are_documented_values() -> None:
    record = parse_record(BASE)
    assert (record.significance, record.episode, record.emotional_valence) == (0.5, False, 0.0)
    assert (record.recall_count, record.agent_id, record.extra) == (0, None, {})
    assert record.timestamp == "2026-05-29T12:00:00.000000+00:00"
    assert record.timestamp_epoch == 1780056000.0


def test_records_are_frozen_and_closed() -> None:
    record = parse_record(BASE)
    with pytest.raises(ValidationError):
        record.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        MemoryRecord(**BASE, mood="sad")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": ""}, "id: string should have at least 1 character"),
        ({"text": ""}, "text must not be empty or blank"),
        ({"text": "   \n"}, "text must not be empty or blank"),
        ({"text": "x" * 4097}, "text: string should have at most 4096 characters"),
        ({"user_id": ""}, "user_id: string should have at least 1 character"),
        ({"user_id": 42}, "user_id: input should be a valid string, got 42"),
        ({"significance": 1.01}, "significance must be within [0, 1], got 1.01"),
        ({"significance": True}, "significance must be a number, got True"),
        ({"significance": float("nan")}, "significance must be finite, got nan"),
        ({"emotional_valence": -1.5}, "emotional_valence must be within [-1, 1], got -1.5"),
        ({"emotional_valence": False}, "emotional_valence must be a number, got False"),
        ({"recall_count": -1}, "recall_count must be >= 0, got -1"),
        ({"recall_count": 2.0}, "recall_count must be an integer, got 2.0"),
        ({"recall_count": True}, "recall_count must be an integer, got True"),
        ({"episode": 1}, "episode: input should be a valid boolean, got 1"),
        ({"episode": "yes"}, "episode: input should be a valid boolean, got 'yes'"),
        ({"agent_id": ""}, "agent_id: string should have at least 1 character"),
        ({"mood": "sad"}, "mood is not a MemoryRecord field"),
        ({"extra": {"user_id": "bob"}}, "extra key 'user_id' is reserved"),
        ({"extra": {"chroma:document": "x"}}, "extra key 'chroma:document' is reserved"),
        ({"extra": {"note": None}}, "extra key 'note' must be a str, int, float or bool, got None"),
        ({"extra": {"tags": ["a"]}}, "extra key 'tags' must be a str, int, float or bool"),
        ({"extra": {"w": float("inf")}}, "extra key 'w' must be finite, got inf"),
        ({"extra": {"n": 2**63}}, "extra key 'n' must fit in 64 bits"),
        ({"extra": {"n": np.int64(3)}}, "extra key 'n' must be a str, int, float or bool"),
        ({"extra": {"": 1}}, "extra keys must be 1-64 character strings"),
        ({"extra": {"k" * 65: 1}}, "extra keys must be 1-64 character strings"),
        ({"extra": {f"k{i}": i for i in range(33)}}, "extra may hold at most 32 keys, got 33"),
        ({"extra": {"s": "x" * 4097}}, "extra key 's' must be at most 4,096 characters"),
        ({"extra": {"$and": 1}}, "extra key '$and' starts with '$', which Chroma reserves"),
        ({"extra": {"$or": 1}}, "extra key '$or' starts with '$'"),
        ({"extra": {"#document": "x"}}, "extra key '#document' starts with '#'"),
        ({"extra": {"#embedding": 1}}, "extra key '#embedding' starts with '#'"),
        ({"extra": {"k\x00": 1}}, "must be text without NUL or lone surrogates"),
        ({"extra": {"\ud800": 1}}, "must be text without NUL or lone surrogates"),
        ({"extra": {"s": "a\udfffb"}}, "extra key 's' holds a lone surrogate"),
        ({"text": "tea \ud800"}, "text must be valid Unicode text (it holds a lone surrogate"),
        ({"id": "m\ud800"}, "id must be valid Unicode text (it holds a lone surrogate"),
        ({"user_id": "\udc80"}, "user_id must be valid Unicode text"),
        ({"id": "m\x001"}, "id must not contain NUL characters"),
        ({"user_id": "ann\x00"}, "user_id must not contain NUL characters"),
        ({"conversation_id": "\x00"}, "conversation_id must not contain NUL characters"),
        ({"recall_count": 2**63}, "recall_count must be at most 9,007,199,254,740,991"),
        ({"recall_count": 2**53}, "recall_count must be at most 9,007,199,254,740,991"),
        ({"extra": "loose"}, "extra must be a mapping"),
    ],
)
def test_bad_fields_are_refused_naming_where_the_field_and_the_value(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(RecordError) as raised:
        parse_record({**BASE, **change}, where="line 9")
    assert str(raised.value).startswith("line 9 (id " if change.get("id", "m1") else "line 9: ")
    assert message in str(raised.value)


def test_every_reserved_key_is_refused_in_extra() -> None:
    for key in RESERVED_KEYS:
        with pytest.raises(RecordError, match="reserved"):
            parse_record({**BASE, "extra": {key: "x"}})


def test_every_problem_of_a_record_is_named() -> None:
    with pytest.raises(RecordError) as raised:
        parse_record({"id": "m1"})
    assert str(raised.value) == (
        "record (id 'm1'): text is required; record (id 'm1'): user_id is required; "
        "record (id 'm1'): timestamp is required (3 problems)"
    )
    with pytest.raises(RecordError, match="expected a MemoryRecord or a mapping"):
        parse_record(["m1"])


def test_timestamp_problems_raise_timestamp_errors() -> None:
    with pytest.raises(TimestampError, match=r"line 2 \(id 'm1'\): timestamp must carry"):
        parse_record({**BASE, "timestamp": "2026-05-29T14:00:00"}, where="line 2")
    with pytest.raises(TimestampError, match="last_recalled_at is not an ISO-8601"):
        parse_record({**BASE, "last_recalled_at": "soon"})


def test_metadata_holds_plain_scalars_only_and_no_none() -> None:
    record = parse_record(
        {**BASE, "significance": np.float32(0.25), "extra": {"w": np.float64(0.5), "ok": True}}
    )
    metadata = record.to_metadata()
    assert None not in metadata.values()
    assert {type(value) for value in metadata.values()} <= {str, int, float, bool}
    assert type(metadata["w"]) is float and type(metadata["significance"]) is float
    assert metadata["timestamp_epoch"] == record.timestamp_epoch
    assert "agent_id" not in metadata and "last_recalled_at" not in metadata


def test_a_stored_row_rebuilds_the_same_record_without_bookkeeping() -> None:
    record = parse_record(
        {**BASE, "agent_id": "a", "last_recalled_at": 0, "extra": {"topic": "home"}}
    )
    metadata = {**record.to_metadata(), "recall_turns": ["t1"]}
    assert MemoryRecord.from_stored(record.id, record.text, metadata) == record


def test_a_batch_is_validated_whole_and_ids_must_be_unique() -> None:
    good = [BASE, {**BASE, "id": "m2"}]
    assert [r.id for r in validate_records(good)] == ["m1", "m2"]
    with pytest.raises(RecordError, match=r"record 2 \(id 'm3'\): significance"):
        validate_records([*good, {**BASE, "id": "m3", "significance": 9}])
    with pytest.raises(RecordError, match="record 2: id 'm1' of user 'ann' repeats record 0"):
        validate_records([*good, BASE])
    # Ids are per user: the same id of another user is another memory.
    assert len(validate_records([*good, {**BASE, "user_id": "bob"}])) == 3


def test_a_batch_error_lists_all_its_problems_up_to_twenty() -> None:
    batch = [{**BASE, "id": f"m{i}", "significance": 9} for i in range(25)]
    batch.insert(3, "not a record")
    with pytest.raises(RecordError) as raised:
        validate_records(batch)
    message = str(raised.value)
    # Before: only "record 0 (id 'm0'): significance ..." was named.
    assert message.startswith("record 0 (id 'm0'): significance must be within [0, 1], got 9; ")
    assert "record 3: expected a MemoryRecord or a mapping of its fields" in message
    assert message.count("; record ") == 19 and message.endswith("; and 6 more (26 problems)")
    assert "\n" not in message


def test_one_record_instead_of_a_list_says_what_to_pass() -> None:
    for single in (BASE, parse_record(BASE)):
        with pytest.raises(RecordError) as raised:
            validate_records(single)  # type: ignore[arg-type]
        # Before: "record 0: expected a MemoryRecord or a mapping, got 'id'".
        assert "expected a list of records, got one" in str(raised.value)
        assert "pass a list (e.g. add([record]))" in str(raised.value)
    with pytest.raises(RecordError, match="got a string"):
        validate_records("m1")


def test_timestamp_problems_alone_raise_a_timestamp_error() -> None:
    with pytest.raises(TimestampError, match="timestamp must carry"):
        validate_records([{**BASE, "timestamp": "2026-05-29T14:00:00"}])
    with pytest.raises(RecordError) as mixed:
        validate_records([{**BASE, "timestamp": "2026-05-29T14:00:00", "significance": 2}])
    assert not isinstance(mixed.value, TimestampError) and "(2 problems)" in str(mixed.value)


def test_a_long_bad_value_is_cut_in_the_message() -> None:
    with pytest.raises(RecordError) as raised:
        parse_record({**BASE, "user_id": 7, "extra": {"s": "x" * 100_000}})
    assert len(str(raised.value)) < 700 and "100000 characters" in str(raised.value)
