"""How the index stays equal to Chroma through crashes: ``documents`` (a user's indexed rows,
written or removed whole), ``journal`` (every Chroma write announced before it is made),
``session`` (one user's lock around a write), ``sync`` (reconciling a dead writer's entries
and backfilling rows the index lacks) and ``rehearsal`` (the recall counts the index owns).
"""
