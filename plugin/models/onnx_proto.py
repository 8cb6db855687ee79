"""A small ONNX protobuf writer: the few messages of ``onnx.proto`` an inference graph needs.

Why our own: the ``onnx`` package is not a dependency (chromadb brings only ``onnxruntime``),
and torch's exporter needs torch. Writing the protobuf wire format directly takes a page, so the
bundled model's graph can be built on any machine that can run it. Field numbers are those of
``onnx/onnx.proto`` at IR version 8; only the fields written here are supported.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["IR_VERSION", "AttributeValue", "GraphBuilder", "Node", "encode_model", "varint"]

IR_VERSION = 8
"""The ONNX IR version written; onnxruntime reads it from 1.10 on."""

AttributeValue = int | float | tuple[int, ...]
"""An operator attribute: an int, a float, or a tuple of ints."""

_WIRE_VARINT, _WIRE_LENGTH, _WIRE_FIXED32 = 0, 2, 5

_TENSOR_TYPES = {np.dtype("<f4"): 1, np.dtype("<i4"): 6, np.dtype("<i8"): 7}
"""Little-endian numpy dtype -> ``TensorProto.DataType`` (FLOAT, INT32, INT64)."""

_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_INTS = 1, 2, 7
"""``AttributeProto.AttributeType`` codes."""


def varint(value: int) -> bytes:
    """A protobuf base-128 varint; a negative int64 takes ten bytes (two's complement)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return varint((number << 3) | wire)


def _int(number: int, value: int) -> bytes:
    return _tag(number, _WIRE_VARINT) + varint(value)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _tag(number, _WIRE_LENGTH) + varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _length_delimited(number, value.encode("utf-8"))


def _float(number: int, value: float) -> bytes:
    return _tag(number, _WIRE_FIXED32) + struct.pack("<f", value)


def _tensor_type(dtype: np.dtype) -> int:
    code = _TENSOR_TYPES.get(dtype.newbyteorder("<"))
    if code is None:
        raise TypeError(f"ONNX tensors of dtype {dtype} are not supported here")
    return code


def _tensor(name: str, array: np.ndarray) -> bytes:
    """A ``TensorProto`` (dims 1, data_type 2, name 8, raw_data 9), little-endian."""
    dtype = array.dtype.newbyteorder("<")
    body = b"".join(_int(1, size) for size in array.shape)
    body += _int(2, _tensor_type(dtype))
    body += _text(8, name)
    body += _length_delimited(9, np.ascontiguousarray(array, dtype=dtype).tobytes())
    return body


def _value_info(name: str, dtype: np.dtype, shape: Sequence[int | str]) -> bytes:
    """A ``ValueInfoProto``: name and ``TypeProto.Tensor`` with fixed or symbolic dimensions."""
    dims = b"".join(
        _length_delimited(1, _text(2, size) if isinstance(size, str) else _int(1, size))
        for size in shape
    )
    tensor = _int(1, _tensor_type(dtype)) + _length_delimited(2, dims)
    return _text(1, name) + _length_delimited(2, _length_delimited(1, tensor))


def _attribute(name: str, value: AttributeValue) -> bytes:
    """An ``AttributeProto`` (name 1, f 2, i 3, ints 8, type 20)."""
    head = _text(1, name)
    if isinstance(value, int):  # a bool too
        return head + _int(3, int(value)) + _int(20, _ATTRIBUTE_INT)
    if isinstance(value, float):
        return head + _float(2, value) + _int(20, _ATTRIBUTE_FLOAT)
    return head + b"".join(_int(8, int(item)) for item in value) + _int(20, _ATTRIBUTE_INTS)


@dataclass(frozen=True)
class Node:
    """One operator of the default ONNX domain with its input and output value names."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, AttributeValue], ...] = ()

    def encode(self, name: str) -> bytes:
        """The ``NodeProto`` (input 1, output 2, name 3, op_type 4, attribute 5)."""
        body = b"".join(_text(1, value) for value in self.inputs)
        body += b"".join(_text(2, value) for value in self.outputs)
        body += _text(3, name) + _text(4, self.op_type)
        body += b"".join(_length_delimited(5, _attribute(k, v)) for k, v in self.attributes)
        return body


@dataclass
class GraphBuilder:
    """A graph being built: nodes in order, named constant tensors, typed inputs and outputs."""

    name: str
    nodes: list[Node] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: list[tuple[str, np.dtype, tuple[int | str, ...]]] = field(default_factory=list)
    outputs: list[tuple[str, np.dtype, tuple[int | str, ...]]] = field(default_factory=list)

    def constant(self, name: str, array: np.ndarray) -> str:
        """Add a named constant (an initializer); returns its name."""
        if name in self.constants:
            raise ValueError(f"constant {name!r} is defined twice")
        self.constants[name] = array
        return name

    def op(self, op_type: str, *inputs: str, **attributes: AttributeValue) -> str:
        """Append one single-output operator; returns the name of its output."""
        output = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(Node(op_type, inputs, (output,), tuple(attributes.items())))
        return output

    def expose(self, value: str, name: str, dtype: np.dtype, shape: tuple[int | str, ...]) -> None:
        """Make ``value`` (an operator's output) a graph output called ``name``."""
        for index, node in enumerate(self.nodes):
            if value in node.outputs:
                renamed = tuple(name if out == value else out for out in node.outputs)
                self.nodes[index] = Node(node.op_type, node.inputs, renamed, node.attributes)
                self.outputs.append((name, dtype, shape))
                return
        raise KeyError(f"no operator produces {value!r}")

    def encode(self) -> Iterator[bytes]:
        """The ``GraphProto`` in pieces (node 1, name 2, initializer 5, input 11, output 12)."""
        for index, node in enumerate(self.nodes):
            yield _length_delimited(1, node.encode(f"{node.op_type}_{index}"))
        yield _text(2, self.name)
        for name, array in self.constants.items():
            yield _length_delimited(5, _tensor(name, array))
        for name, dtype, shape in self.inputs:
            yield _length_delimited(11, _value_info(name, dtype, shape))
        for name, dtype, shape in self.outputs:
            yield _length_delimited(12, _value_info(name, dtype, shape))


def encode_model(
    graph: GraphBuilder, *, opset: int, producer: str, metadata: dict[str, str] | None = None
) -> bytes:
    """A serialised ``ModelProto`` holding ``graph`` for the default domain at ``opset``.

    Fields: ir_version 1, producer_name 2, graph 7, opset_import 8, metadata_props 14.
    """
    parts = [
        _int(1, IR_VERSION),
        _text(2, producer),
        _length_delimited(7, b"".join(graph.encode())),
        _length_delimited(8, _text(1, "") + _int(2, opset)),
    ]
    parts += [
        _length_delimited(14, _text(1, key) + _text(2, value))
        for key, value in (metadata or {}).items()
    ]
    return b"".join(parts)
