"""The exemplar vectors on disk: embedded once per model and exemplar set, then read back.

Why: embedding the 410 exemplars of the English preset is most of ``classify``'s time and of
the MCP server's start (about 1-3 s on two busy cores), yet the vectors depend only on the model
files and the exact texts. An embedder that names its vectors exactly (a ``cache_key``, as
``OnnxEmbedder`` has) gets them from ``CACHE/vectors/<key>.npy``; a file that does not load or
does not fit is recomputed and replaced, and an unwritable cache only means recomputing.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from affect_memory.models.cache import cache_dir, write_atomically

__all__ = ["cached_vectors", "vectors_path"]

logger = logging.getLogger(__name__)


def vectors_path(cache_key: str, texts: Sequence[str]) -> Path:
    """The cache file of ``texts`` embedded by the model ``cache_key`` names."""
    digest = hashlib.sha256(f"{cache_key}\n".encode())
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))  # length first: no two lists collide
        digest.update(data)
    return cache_dir() / "vectors" / f"{digest.hexdigest()[:32]}.npy"


def cached_vectors(
    cache_key: str, texts: Sequence[str], embed: Callable[[Sequence[str]], np.ndarray]
) -> np.ndarray:
    """``embed(texts)``, from the cache when the model ``cache_key`` names embedded them before."""
    path = vectors_path(cache_key, texts)
    try:
        stored: np.ndarray = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, EOFError) as error:
        logger.warning("cached vectors %s do not load (%s); recomputing them", path, error)
    else:
        if (
            stored.dtype == np.float32
            and stored.ndim == 2
            and stored.shape[0] == len(texts)
            and np.isfinite(stored).all()
        ):
            return stored
        logger.warning(
            "cached vectors %s hold %s %s; recomputing them", path, stored.dtype, stored.shape
        )
    vectors = np.ascontiguousarray(embed(texts), dtype=np.float32)
    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    write_atomically(path, buffer.getvalue())  # unwritable: the next process recomputes
    return vectors
