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
)
"""Keys of one recall result, in order (``recall --json``, MCP ``recall``, ``RecallHit``)."""
