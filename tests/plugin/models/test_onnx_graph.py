"""The sentence-encoder graph: deterministic bytes, dynamic shapes, and refusals named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from affect_memory.errors import EmbeddingError
from affect_memory.models.onnx_embedder import bundled_model_dir
from affect_memory.models.onnx_graph import (
    OUTPUT_NAME,
    BertShape,
    build_sentence_encoder,
    read_safetensors,
)
from tests.plugin.models.helpers import model_copy


@pytest.fixture(scope="module")
def graph() -> bytes:
    return build_sentence_encoder(bundled_model_dir())


def test_two_builds_are_byte_identical(graph: bytes) -> None:
    # Processes that build at once write the same bytes, so the last rename loses nothing.
    assert build_sentence_encoder(bundled_model_dir()) == graph


@pytest.mark.parametrize(("batch", "length"), [(1, 2), (7, 19), (64, 256)])
def test_the_graph_runs_any_batch_and_length_into_unit_rows(
    graph: bytes, batch: int, length: int
) -> None:
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(batch)
    ids = rng.integers(1000, 30000, size=(batch, length), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    mask = np.ones_like(ids)
    mask[0, length // 2 :] = 0  # one padded row
    (vectors,) = session.run([OUTPUT_NAME], {"input_ids": ids, "attention_mask": mask})
    assert vectors.shape == (batch, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_padding_does_not_change_a_row(graph: bytes) -> None:
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    (alone,) = session.run([OUTPUT_NAME], {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    padded = np.concatenate([ids, np.zeros((1, 6), dtype=np.int64)], axis=1)
    mask = (padded != 0).astype(np.int64)
    (with_padding,) = session.run([OUTPUT_NAME], {"input_ids": padded, "attention_mask": mask})
    np.testing.assert_allclose(with_padding, alone, atol=1e-6)


def test_configs_the_graph_does_not_reproduce_are_refused(tmp_path: Path) -> None:
    cases = {
        "roberta": ({"model_type": "roberta"}, "model_type is 'roberta'"),
        "relu": ({"hidden_act": "relu"}, "hidden_act is 'relu'"),
        "relative": ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        "heads": ({"num_attention_heads": 5}, "hidden_size 384 is not split into heads"),
    }
    for name, (edit, message) in cases.items():
        with pytest.raises(EmbeddingError, match=message):
            BertShape.read(model_copy(tmp_path / name, config_json=edit))
    broken = model_copy(tmp_path / "broken")
    config = json.loads((broken / "config.json").read_text())
    del config["hidden_size"]
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(EmbeddingError, match="lacks a usable 'hidden_size'"):
        BertShape.read(broken)


def test_a_damaged_weights_file_is_a_clear_error(tmp_path: Path) -> None:
    weights = bundled_model_dir() / "model.safetensors"
    assert len(read_safetensors(weights)) > 50
    truncated = tmp_path / "truncated.safetensors"
    with weights.open("rb") as source:
        truncated.write_bytes(source.read(os.path.getsize(weights) // 2))
    with pytest.raises(EmbeddingError, match=r"truncated\.safetensors is not a readable"):
        read_safetensors(truncated)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(EmbeddingError, match="header length"):
        read_safetensors(garbage)
    with pytest.raises(EmbeddingError, match="cannot read the model weights"):
        read_safetensors(tmp_path / "missing.safetensors")
