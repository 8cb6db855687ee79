"""Recall's read path: from a query to ranked memories that explain themselves.

In reading order: ``plan`` (what a query asks for, as a typed ``QueryPlan``, from the cue
lexicon of ``lexicon/``), ``pool`` (the candidates: Chroma's nearest and the index's BM25
matches), the features (``fusion``: the share of the query matched and the cosine;
``feedback``: resemblance to the query's closest memory; ``life_topics``: topic agreement;
``change_cues``: whether a memory reports a change; ``periods``: the period a query names),
``time_rule`` (each plan's relevance and ages, and the reason each hit prints),
``pruning`` (fetch only the members that can reach the top), ``explanation`` (ranked rows
out as hits that carry every part of their score) and ``pipeline`` (``HybridRecall``: the
steps in order, one user's queries at a time).
"""
