"""``EmbedAhead``: the next texts embed in a helper thread, taken in order, and no thread or
vector outlives a failure (a counting embedder, so no model is loaded)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from affect_memory.errors import EmbeddingError
from affect_memory.models.ahead import EmbedAhead


class Recording:
    """An embedder of 4-dimensional unit vectors that records each call's texts and thread."""

    name = "recording"
    dimension = 4

    def __init__(self, *, gate: threading.Event | None = None, fail: str | None = None) -> None:
        self.calls: list[tuple[tuple[str, ...], str]] = []
        self.gate = gate
        self.fail = fail
        self.entered = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((tuple(texts), threading.current_thread().name))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30), "the test never opened the gate"
        if self.fail is not None and self.fail in texts:
            raise EmbeddingError(f"cannot embed {self.fail}")
        out = np.zeros((len(texts), 4), dtype=np.float32)
        out[:, 0] = 1.0
        out[:, 1] = [len(text) for text in texts]
        unit: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
        return unit

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


def helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("affect-memory embed-ahead")]


def test_started_texts_embed_in_the_helper_and_are_taken_in_order() -> None:
    model = Recording()
    texts = [f"text {i:03d}" + "x" * i for i in range(10)]
    with EmbedAhead(model, step=4) as ahead:
        ahead.start(texts)
        vectors = ahead.take(texts)
    expected = model.embed_documents(texts)
    np.testing.assert_allclose(vectors, expected)
    called = model.calls[:-1]
    assert [len(batch) for batch, _ in called] == [4, 3, 3]  # near-equal calls of at most 4
    assert [text for batch, _ in called for text in batch] == texts
    assert all(name.startswith("affect-memory embed-ahead") for _, name in called)
    assert not helpers()


def test_taking_other_texts_drops_the_pending_ones_and_embeds_them_here() -> None:
    model = Recording()
    with EmbedAhead(model) as ahead:
        ahead.start(["a", "b"])
        vectors = ahead.take(["c"])
        assert vectors.shape == (1, 4)
        assert model.calls[-1] == (("c",), threading.current_thread().name)
        assert ahead.take(["a", "b"]).shape == (2, 4)  # nothing pending: embedded here too
        assert model.calls[-1][1] == threading.current_thread().name


def test_without_the_helper_every_text_embeds_in_the_callers_thread() -> None:
    model = Recording()
    with EmbedAhead(model, enabled=False) as ahead:
        ahead.start(["a", "b"])
        assert not model.calls and not helpers()
        ahead.take(["a", "b"])
    assert model.calls == [(("a", "b"), threading.current_thread().name)]


def test_the_helpers_error_is_raised_by_take() -> None:
    model = Recording(fail="b")
    with EmbedAhead(model) as ahead:
        ahead.start(["a", "b"])
        with pytest.raises(EmbeddingError, match="cannot embed b"):
            ahead.take(["a", "b"])
    assert not helpers()


def test_closing_mid_embedding_stops_after_the_current_call_and_ends_the_thread() -> None:
    gate = threading.Event()
    model = Recording(gate=gate)
    ahead = EmbedAhead(model, step=2)
    ahead.start([f"t{i}" for i in range(8)])  # four calls of two
    assert model.entered.wait(30)
    assert len(helpers()) == 1
    ahead.stop()  # as a failed write does first
    gate.set()
    ahead.close()
    assert not helpers()
    assert len(model.calls) == 1  # the call under way finished; the other three never ran


def test_a_failure_in_the_caller_leaves_no_thread() -> None:
    gate = threading.Event()
    model = Recording(gate=gate)
    with pytest.raises(RuntimeError, match="the write failed"), EmbedAhead(model) as ahead:
        ahead.start(["a", "b"])
        assert model.entered.wait(30)
        gate.set()
        raise RuntimeError("the write failed")
    assert not helpers()


def test_step_must_be_positive() -> None:
    with pytest.raises(ValueError, match="step must be an integer >= 1"):
        EmbedAhead(Recording(), step=0)
