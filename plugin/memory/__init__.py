"""Long-term memories: validated records in, kernel-ranked recalls out, per user.

The facade is ``store`` (``ChromaMemory``: checks and delegation). Beside it, the values it
takes and returns: ``records`` and ``batches`` (what a memory is, and every problem of a
batch), ``timestamps`` (one canonical UTC form), ``results``, ``problems``, ``settings``
(every constant of recall's ranking) and ``filters`` (recall's ``where``); the data rights
(``export``, ``erasure``) and ``retriever`` (one user's memories for the engine). The rooms:
``recall/`` (the read path), ``chroma/`` (the only code that calls Chroma), ``index/`` (the
memory index and how it stays consistent with Chroma), ``turns/`` (what a committed turn
owes the memory) and ``admin/`` (migrate, adopt; nothing here imports it).
"""
