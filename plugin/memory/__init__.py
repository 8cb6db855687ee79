"""Long-term memories in Chroma: validated records in, kernel-ranked recalls out.

In reading order: ``records`` and ``batches`` (what a memory is, and every problem of a batch),
``timestamps`` (one canonical UTC form), ``location``, ``locks`` and ``layout`` (where a store
lives and how users map to collections), ``rows`` (the one mapper from stored columns to
checked rows), ``results`` (what calls return), ``settings`` (every constant of recall's
ranking), ``filters`` (recall's ``where``), recall's read path (``recall/``; the lexical
index is ``index/``), ``store`` (``ChromaMemory`` itself), ``turn_writes`` and ``effects``
(what a committed turn owes the memory, through the outbox) and ``retriever`` (one user's
memories for the engine).
"""
