"""The ONNX graph of a BERT sentence encoder, built from ``model.safetensors`` with numpy alone.

The graph computes what sentence-transformers computes after tokenising for a model made of
Transformer -> mean Pooling -> Normalize (all-MiniLM-L6-v2): BERT's last hidden state, its mean
over the attended tokens, and L2 normalisation. Inputs ``input_ids`` and ``attention_mask``
(int64, ``[batch, sequence]``, both dynamic); output ``sentence_embedding`` (float32,
``[batch, hidden]``). Building takes about half a second and is byte-for-byte deterministic, so
processes that build at once write identical files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from affect_memory.errors import EmbeddingError
from affect_memory.models.onnx_proto import GraphBuilder, encode_model

__all__ = [
    "GRAPH_VERSION",
    "OPSET",
    "OUTPUT_NAME",
    "BertShape",
    "build_sentence_encoder",
    "read_safetensors",
]

GRAPH_VERSION = "1"
"""Changes whenever the graph built here changes: part of the cached graph's key."""

OPSET = 17
"""ONNX opset 17 (LayerNormalization), run by onnxruntime 1.13 and later."""

OUTPUT_NAME = "sentence_embedding"
"""The graph's one output: unit sentence vectors."""

_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}
_MAX_HEADER_BYTES = 100_000_000
"""A safetensors header longer than this is a corrupt file, not a model."""


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file as a read-only, memory-mapped numpy array.

    The format is an 8-byte little-endian header length, a JSON header mapping each tensor to
    its dtype, shape and byte offsets, then the raw little-endian data.
    """
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as error:
        raise EmbeddingError(f"cannot read the model weights {path}: {error}") from None
    try:
        size = int(np.frombuffer(data[:8], dtype="<u8")[0])
        if not 0 < size <= min(_MAX_HEADER_BYTES, len(data) - 8):
            raise ValueError(f"header length {size} does not fit the {len(data)}-byte file")
        header: dict[str, Any] = json.loads(bytes(data[8 : 8 + size]))
        header.pop("__metadata__", None)
        body = data[8 + size :]
        tensors: dict[str, np.ndarray] = {}
        for name, entry in header.items():
            dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
            if dtype is None:
                raise ValueError(f"tensor {name!r} has unsupported dtype {entry['dtype']!r}")
            start, end = (int(offset) for offset in entry["data_offsets"])
            shape = tuple(int(size) for size in entry["shape"])
            expected = math.prod(shape) * np.dtype(dtype).itemsize
            if not 0 <= start <= end <= len(body) or end - start != expected:
                raise ValueError(f"tensor {name!r} has offsets {start}..{end} for shape {shape}")
            tensors[name] = np.frombuffer(body[start:end], dtype=dtype).reshape(shape)
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise EmbeddingError(f"{path} is not a readable safetensors file: {error}") from None
    return tensors


@dataclass(frozen=True)
class BertShape:
    """The numbers of a BERT encoder the graph is built from (its ``config.json``)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @classmethod
    def read(cls, model_dir: Path) -> BertShape:
        """Read ``config.json``, refusing what this graph would not reproduce exactly."""
        path = model_dir / "config.json"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise EmbeddingError(f"cannot read {path}: {error}") from None
        refusals = {
            "model_type": (config.get("model_type"), "bert"),
            "hidden_act": (config.get("hidden_act"), "gelu"),
            "position_embedding_type": (
                config.get("position_embedding_type", "absolute"),
                "absolute",
            ),
        }
        for key, (found, wanted) in refusals.items():
            if found != wanted:
                raise EmbeddingError(
                    f"{path}: {key} is {found!r}; the ONNX embedder builds only {wanted!r} "
                    "(use SentenceTransformerEmbedder for this model)"
                )
        try:
            shape = cls(
                hidden=int(config["hidden_size"]),
                layers=int(config["num_hidden_layers"]),
                heads=int(config["num_attention_heads"]),
                intermediate=int(config["intermediate_size"]),
                max_positions=int(config["max_position_embeddings"]),
                layer_norm_eps=float(config["layer_norm_eps"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise EmbeddingError(f"{path} lacks a usable {error}") from None
        if shape.heads < 1 or shape.hidden % shape.heads:
            raise EmbeddingError(f"{path}: hidden_size {shape.hidden} is not split into heads")
        return shape


class _Encoder:
    """Adds BERT's sub-layers to a graph, reading the weights by their Hugging Face names."""

    def __init__(self, graph: GraphBuilder, weights: dict[str, np.ndarray], shape: BertShape):
        self.graph = graph
        self.weights = weights
        self.shape = shape

    def weight(self, name: str, *, transposed: bool = False) -> str:
        """A model tensor as a float32 constant (``nn.Linear`` weights pre-transposed)."""
        try:
            array = np.asarray(self.weights[name], dtype=np.float32)
        except KeyError:
            raise EmbeddingError(f"model.safetensors has no tensor {name!r}") from None
        return self.graph.constant(name, np.ascontiguousarray(array.T if transposed else array))

    def shared_constants(self) -> None:
        shape, graph = self.shape, self.graph
        scalars = {
            "one": 1.0,
            "half": 0.5,
            "sqrt_two": math.sqrt(2.0),
            "score_scale": 1.0 / math.sqrt(shape.head_size),
            "masked": float(np.finfo(np.float32).min),
            "count_floor": 1e-9,  # sentence-transformers' clamp of the token count
            "norm_floor": 1e-12,  # torch.nn.functional.normalize's eps
        }
        for name, value in scalars.items():
            graph.constant(name, np.array(value, dtype=np.float32))
        vectors = {
            "split_heads": [0, 0, shape.heads, shape.head_size],
            "merge_heads": [0, 0, shape.hidden],
            "index_0": [0],
            "index_1": [1],
            "index_2": [2],
            "axes_1_2": [1, 2],
        }
        for name, values in vectors.items():
            graph.constant(name, np.array(values, dtype=np.int64))

    def dense(self, x: str, prefix: str) -> str:
        """``x @ W.T + b`` for ``prefix.weight`` and ``prefix.bias``."""
        product = self.graph.op("MatMul", x, self.weight(f"{prefix}.weight", transposed=True))
        return self.graph.op("Add", product, self.weight(f"{prefix}.bias"))

    def layer_norm(self, x: str, prefix: str) -> str:
        return self.graph.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=self.shape.layer_norm_eps,
        )

    def embeddings(self, ids: str) -> str:
        """Word + position + token-type embeddings, then LayerNorm."""
        graph = self.graph
        words = graph.op("Gather", self.weight("embeddings.word_embeddings.weight"), ids, axis=0)
        length = graph.op("Slice", graph.op("Shape", ids), "index_1", "index_2")
        positions = graph.op(
            "Slice", self.weight("embeddings.position_embeddings.weight"), "index_0", length
        )
        # One sentence per input: every token type is 0, so its embedding is a single row.
        try:
            types = np.asarray(self.weights["embeddings.token_type_embeddings.weight"], np.float32)
        except KeyError:
            raise EmbeddingError("model.safetensors has no token-type embeddings") from None
        type_zero = graph.constant("token_type_zero", np.ascontiguousarray(types[0]))
        summed = graph.op("Add", graph.op("Add", words, positions), type_zero)
        return self.layer_norm(summed, "embeddings.LayerNorm")

    def heads(self, x: str, order: tuple[int, ...]) -> str:
        """``[B, S, hidden]`` -> ``[B, heads, S, size]`` (``order`` (0, 2, 3, 1) for keys)."""
        split = self.graph.op("Reshape", x, "split_heads")
        return self.graph.op("Transpose", split, perm=order)

    def attention(self, x: str, mask_bias: str, prefix: str) -> str:
        graph = self.graph
        queries = self.heads(self.dense(x, f"{prefix}.self.query"), (0, 2, 1, 3))
        keys = self.heads(self.dense(x, f"{prefix}.self.key"), (0, 2, 3, 1))
        values = self.heads(self.dense(x, f"{prefix}.self.value"), (0, 2, 1, 3))
        scores = graph.op("Mul", graph.op("MatMul", queries, keys), "score_scale")
        weights = graph.op("Softmax", graph.op("Add", scores, mask_bias), axis=-1)
        context = graph.op("Transpose", graph.op("MatMul", weights, values), perm=(0, 2, 1, 3))
        merged = graph.op("Reshape", context, "merge_heads")
        projected = self.dense(merged, f"{prefix}.output.dense")
        return self.layer_norm(graph.op("Add", projected, x), f"{prefix}.output.LayerNorm")

    def feed_forward(self, x: str, prefix: str) -> str:
        graph = self.graph
        up = self.dense(x, f"{prefix}.intermediate.dense")
        # Exact GELU (hidden_act "gelu"): x * (1 + erf(x / sqrt 2)) / 2.
        erf = graph.op("Erf", graph.op("Div", up, "sqrt_two"))
        activated = graph.op("Mul", graph.op("Mul", up, graph.op("Add", erf, "one")), "half")
        down = self.dense(activated, f"{prefix}.output.dense")
        return self.layer_norm(graph.op("Add", down, x), f"{prefix}.output.LayerNorm")

    def mean_pool_and_normalise(self, hidden: str, mask: str) -> str:
        graph = self.graph
        mask_3d = graph.op("Unsqueeze", mask, "index_2")
        total = graph.op("ReduceSum", graph.op("Mul", hidden, mask_3d), "index_1", keepdims=0)
        count = graph.op("ReduceSum", mask_3d, "index_1", keepdims=0)
        mean = graph.op("Div", total, graph.op("Max", count, "count_floor"))
        squares = graph.op("ReduceSum", graph.op("Mul", mean, mean), "index_1", keepdims=1)
        norm = graph.op("Max", graph.op("Sqrt", squares), "norm_floor")
        return graph.op("Div", mean, norm)


def build_sentence_encoder(model_dir: Path) -> bytes:
    """The serialised ONNX model of the mean-pooled, normalised BERT encoder in ``model_dir``."""
    shape = BertShape.read(model_dir)
    weights = {
        name.removeprefix("bert."): tensor
        for name, tensor in read_safetensors(model_dir / "model.safetensors").items()
    }
    graph = GraphBuilder("sentence_encoder")
    int64, float32 = np.dtype(np.int64), np.dtype(np.float32)
    graph.inputs = [
        ("input_ids", int64, ("batch", "sequence")),
        ("attention_mask", int64, ("batch", "sequence")),
    ]
    encoder = _Encoder(graph, weights, shape)
    encoder.shared_constants()
    mask = graph.op("Cast", "attention_mask", to=1)  # 1 = FLOAT
    # Added to the attention scores: 0 for a real token, float32's lowest for padding.
    padding = graph.op("Unsqueeze", graph.op("Sub", "one", mask), "axes_1_2")
    mask_bias = graph.op("Mul", padding, "masked")
    x = encoder.embeddings("input_ids")
    for layer in range(shape.layers):
        x = encoder.attention(x, mask_bias, f"encoder.layer.{layer}.attention")
        x = encoder.feed_forward(x, f"encoder.layer.{layer}")
    pooled = encoder.mean_pool_and_normalise(x, mask)
    graph.expose(pooled, OUTPUT_NAME, float32, ("batch", shape.hidden))
    return encode_model(
        graph,
        opset=OPSET,
        producer="affect-memory",
        metadata={"graph_version": GRAPH_VERSION, "pooling": "mean", "normalize": "l2"},
    )
