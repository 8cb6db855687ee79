"""Embedding a batch's next chunk in a helper thread while the caller writes the current one.

ONNX Runtime releases the GIL while it computes, so a writer that hands chunk i+1 to
``EmbedAhead.start`` before it writes chunk i runs the two at once. Only embedding happens in
the helper: every write, and the order of writes, stays in the caller's thread, which takes
the vectors with ``take``. At most one embedding is pending; ``take`` of other texts than the
pending ones drops it (stopping it, waiting for it) and embeds in the caller's thread, as a
writer without a helper would. The helper embeds in calls of at most ``STEP`` texts, checking
between calls whether it was stopped, so ``close`` (which leaving the ``with`` block does,
after any failure) waits for at most one call: no thread outlives the write, and what was
embedded ahead and not taken is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

import numpy as np

from affect_memory.models.embeddings import Embedder, check_embeddings

__all__ = ["STEP", "EmbedAhead"]

STEP = 128
"""Most texts the helper embeds per call: the longest a stopped helper keeps running."""


class _Stopped(Exception):
    """The helper was stopped between two calls; its result is dropped."""


class EmbedAhead:
    """One embedding at a time in a helper thread, taken by the caller in the order it writes."""

    def __init__(self, embedder: Embedder, *, enabled: bool = True, step: int = STEP) -> None:
        """Embed with ``embedder``; without ``enabled`` every text is embedded in ``take``."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise ValueError(f"step must be an integer >= 1, got {step!r}")
        self._embedder = embedder
        self._enabled = enabled
        self._step = step
        self._executor: ThreadPoolExecutor | None = None
        self._pending: tuple[tuple[str, ...], Future[np.ndarray], threading.Event] | None = None

    @property
    def enabled(self) -> bool:
        """Whether ``start`` embeds in the helper thread (else it does nothing)."""
        return self._enabled

    def start(self, texts: Sequence[str]) -> None:
        """Begin embedding ``texts`` in the helper thread, dropping any embedding still pending."""
        if not self._enabled or not texts:
            return
        self._drop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="affect-memory embed-ahead"
            )
        stop = threading.Event()
        wanted = tuple(texts)
        self._pending = (wanted, self._executor.submit(self._embed_steps, wanted, stop), stop)

    def take(self, texts: Sequence[str]) -> np.ndarray:
        """The ``(len(texts), dimension)`` vectors of ``texts``: the helper's when it embeds
        exactly these (waiting for it, raising its error), else embedded now in this thread."""
        pending = self._pending
        if pending is not None and pending[0] == tuple(texts):
            self._pending = None
            return pending[1].result()
        self._drop()
        return check_embeddings(self._embedder.embed_documents(list(texts)), len(texts))

    def stop(self) -> None:
        """Tell a pending embedding to end after its current call (``close`` waits for it)."""
        if self._pending is not None:
            self._pending[2].set()

    def close(self) -> None:
        """Drop any pending embedding and end the helper thread, waiting for it."""
        self._drop()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def __enter__(self) -> EmbedAhead:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _drop(self) -> None:
        """Stop the pending embedding, wait for it to end, and forget it."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        _, future, stop = pending
        stop.set()
        future.cancel()
        if not future.cancelled():
            future.exception()  # waits; its vectors or its error are of no use any more

    def _embed_steps(self, texts: Sequence[str], stop: threading.Event) -> np.ndarray:
        """Embed ``texts`` in near-equal calls of at most ``step`` texts, unless stopped."""
        calls = -(-len(texts) // self._step)
        parts: list[np.ndarray] = []
        for bounds in np.array_split(np.arange(len(texts)), calls):
            if stop.is_set():
                raise _Stopped
            part = [texts[int(at)] for at in bounds]
            dimension = parts[0].shape[1] if parts else None
            vectors = self._embedder.embed_documents(part)
            parts.append(check_embeddings(vectors, len(part), dimension))
        return np.concatenate(parts)
