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
    "plan",
)
"""Keys of one recall result, in order (``recall --json``, MCP ``recall``, ``RecallHit``).

Issue 12 added five on purpose: what the similarity was made of, the age recency was scored at
and why, the calendar age, and when a turn last surfaced the memory; issue 21 the plan's kind."""

RELEVANCE_KEYS = (
    "fused",
    "lexical",
    "dense",
    "bm25",
    "cosine",
    "topic",
    "closest",
    "share",
    "cue_scale",
    "change",
    "weights",
)
"""Keys of a result's ``relevance`` object, in order."""


def state_similarity_of(relevance: dict[str, object]) -> float:
    """A current-state hit's similarity recomputed from its ``relevance`` object alone: the
    parts and the weights it carries (what a client can check a score by)."""
    weights = relevance["weights"]
    assert isinstance(weights, dict)
    cosine, closest = float(relevance["cosine"]), relevance["closest"]  # type: ignore[arg-type]
    if closest is not None:
        cosine = (1 - weights["closest"]) * cosine + weights["closest"] * float(closest)  # type: ignore[arg-type]
    base = weights["cosine"] * max(0.0, cosine) + weights["words_matched"] * float(
        relevance["share"] or 0.0  # type: ignore[arg-type]
    )
    scale = float(relevance["cue_scale"])  # type: ignore[arg-type]
    base += weights["topic"] * scale * float(relevance["topic"] or 0.0)  # type: ignore[arg-type]
    gain = 1 + weights["change_gain"] * scale if relevance["change"] is not None else 1.0
    return float(min(1.0, base * gain))
