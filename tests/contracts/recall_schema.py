"""The recall result schema the issue fixes, pinned once for every door that returns it."""

RECALL_RESULT_KEYS = (
    "id",
    "text",
    "score",
    "distance",
    "similarity",
    "recency",
    "salience",
    "congruence",
    "episode",
    "timestamp",
    "significance",
    "recall_count",
    "emotional_valence",
    "relevance",
    "age_days",
    "calendar_age_days",
    "time_rule",
    "last_recalled_at",
)
"""Keys of one recall result, in order (``recall --json``, MCP ``recall``, ``RecallHit``).

Issue 12 added the last five on purpose: what the similarity was made of, the age recency was
scored at and why, the calendar age, and when a turn last surfaced the memory."""

RELEVANCE_KEYS = ("fused", "lexical", "dense", "bm25", "cosine", "topic", "closest")
"""Keys of a result's ``relevance`` object, in order."""
