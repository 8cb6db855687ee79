"""The ONNX protobuf writer: varints, and small graphs that onnxruntime loads and runs right."""

from __future__ import annotations

import numpy as np
import onnxruntime  # tests/conftest.py has set ORT_DISABLE_TELEMETRY
import pytest

from affect_memory.models.onnx_proto import GraphBuilder, encode_model, varint

FLOAT = np.dtype(np.float32)


def test_varints_follow_the_protobuf_encoding() -> None:
    assert varint(0) == b"\x00"
    assert varint(1) == b"\x01"
    assert varint(127) == b"\x7f"
    assert varint(128) == b"\x80\x01"
    assert varint(300) == b"\xac\x02"
    # A negative int64 is its 64-bit two's complement: always ten bytes.
    assert varint(-1) == b"\xff" * 9 + b"\x01"
    assert len(varint(-(2**63))) == 10


def _run(graph: GraphBuilder, **inputs: np.ndarray) -> list[np.ndarray]:
    model = encode_model(graph, opset=17, producer="test", metadata={"purpose": "test"})
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    outputs: list[np.ndarray] = session.run(None, inputs)
    return outputs


def test_a_graph_with_every_attribute_kind_runs_as_numpy_computes_it() -> None:
    gamma = np.array([2.0, -1.0, 0.5], dtype=np.float32)
    graph = GraphBuilder("probe")
    graph.inputs = [("x", FLOAT, ("batch", 3))]
    graph.constant("gamma", gamma)
    graph.constant("beta", np.full(3, 0.25, dtype=np.float32))
    scaled = graph.op("Mul", "x", "gamma")
    normed = graph.op("LayerNormalization", scaled, "gamma", "beta", axis=-1, epsilon=1e-5)
    flipped = graph.op("Transpose", normed, perm=(1, 0))
    graph.expose(flipped, "y", FLOAT, (3, "batch"))
    x = np.array([[1.0, 2.0, 3.0], [-4.0, 0.0, 4.0]], dtype=np.float32)
    (y,) = _run(graph, x=x)
    z = x * gamma
    normalised = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, (normalised * gamma + 0.25).T, rtol=1e-5, atol=1e-6)


def test_int64_constants_and_symbolic_dimensions_round_trip() -> None:
    graph = GraphBuilder("ints")
    graph.inputs = [("ids", np.dtype(np.int64), ("batch", "sequence"))]
    table = graph.constant("table", np.arange(12, dtype=np.float32).reshape(4, 3))
    picked = graph.op("Gather", table, "ids", axis=0)
    shape = graph.constant("shape", np.array([0, -1], dtype=np.int64))  # negative int64 data
    graph.expose(graph.op("Reshape", picked, shape), "rows", FLOAT, ("batch", "flat"))
    ids = np.array([[3, 0], [1, 1]], dtype=np.int64)
    (rows,) = _run(graph, ids=ids)
    np.testing.assert_array_equal(rows, np.arange(12.0).reshape(4, 3)[ids].reshape(2, -1))


def test_the_same_graph_encodes_to_the_same_bytes() -> None:
    def build() -> bytes:
        graph = GraphBuilder("same")
        graph.inputs = [("x", FLOAT, ("n",))]
        graph.constant("c", np.linspace(0, 1, 5, dtype=np.float32))
        graph.expose(graph.op("Add", "x", "c"), "y", FLOAT, ("n",))
        return encode_model(graph, opset=17, producer="test")

    assert build() == build()


def test_mistakes_are_refused() -> None:
    graph = GraphBuilder("bad")
    graph.constant("c", np.zeros(2, dtype=np.float32))
    with pytest.raises(ValueError, match="'c' is defined twice"):
        graph.constant("c", np.ones(2, dtype=np.float32))
    with pytest.raises(KeyError, match="no operator produces 'nothing'"):
        graph.expose("nothing", "y", FLOAT, (2,))
    graph.constant("strings", np.array(["a"]))
    with pytest.raises(TypeError, match="dtype <U1"):
        encode_model(graph, opset=17, producer="test")
