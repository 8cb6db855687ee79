"""Embeddings as the index keeps them, decoded for the topic product: float32 rows in one copy
when every one is float32, row by row otherwise, and no row where there is none to read."""

from __future__ import annotations

import numpy as np

from affect_memory.memory.recall.pool import index_vector, index_vectors


def test_float32_blobs_decode_to_their_values_in_one_matrix() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(4, 5)).astype("<f4")
    rows, held = index_vectors([row.tobytes() for row in vectors], 5)
    assert rows.dtype == np.float32 and rows.shape == (4, 5)
    assert np.array_equal(rows, vectors) and held.tolist() == [True] * 4


def test_an_http_clients_float64_blobs_decode_in_one_matrix_too() -> None:
    values = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], dtype="<f8")
    rows, held = index_vectors([row.tobytes() for row in values], 3)
    assert held.tolist() == [True, True]
    assert np.array_equal(rows, values.astype(np.float32))


def test_missing_widened_and_wrong_length_blobs_are_read_row_by_row() -> None:
    wide = np.array([0.1, 0.2, 0.3], dtype="<f8")  # an HTTP client's decimal-parsed values
    narrow = np.array([1.0, 2.0, 3.0], dtype="<f4")
    blobs = [narrow.tobytes(), None, wide.tobytes(), b"\x00" * 5, b""]
    rows, held = index_vectors(blobs, 3)
    assert held.tolist() == [True, False, True, False, False]
    assert rows[0].tolist() == [1.0, 2.0, 3.0]
    assert rows[2].tolist() == wide.astype(np.float32).tolist()
    assert not rows[[1, 3, 4]].any()
    # lengths that add up to n float32 rows but are not each one are not taken for them
    rows, held = index_vectors([wide.tobytes(), b""], 3)
    assert held.tolist() == [True, False]
    assert index_vector(wide.tobytes(), 3) is not None and index_vector(b"", 3) is None
    assert index_vectors([], 3)[0].shape == (0, 3)
