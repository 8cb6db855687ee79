"""The user cache: where it is, atomic writes, remembered digests, and the cached ONNX graph
under concurrent first use, an unwritable cache and a damaged file."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from affect_memory.models import onnx_embedder
from affect_memory.models.cache import (
    CACHE_ENV,
    STALE_TEMP_SECONDS,
    cache_dir,
    file_sha256,
    write_atomically,
)
from affect_memory.models.onnx_embedder import (
    OnnxEmbedder,
    bundled_model_dir,
    graph_path,
    model_key,
)
from affect_memory.models.onnx_graph import build_sentence_encoder
from tests.plugin.models.helpers import ROOT, model_copy


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own, and no ONNX session loaded yet in this process."""
    path = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(path))
    monkeypatch.setattr(onnx_embedder, "_SESSIONS", {})
    return path


def test_the_cache_directory_is_the_variable_else_xdg_else_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "chosen"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "chosen"
    monkeypatch.delenv(CACHE_ENV)
    assert cache_dir() == tmp_path / "xdg" / "affect-memory"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "affect-memory"


def test_an_atomic_write_leaves_one_whole_readable_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "file.bin"
    assert write_atomically(target, b"first") is None
    assert write_atomically(target, b"second") is None
    assert target.read_bytes() == b"second"
    assert target.stat().st_mode & 0o777 == 0o644
    assert sorted(path.name for path in target.parent.iterdir()) == ["file.bin"]


def test_a_killed_writers_old_temporary_file_is_removed_and_a_fresh_one_kept(
    tmp_path: Path,
) -> None:
    target = tmp_path / "file.bin"
    old, fresh = tmp_path / ".file.bin.old.tmp", tmp_path / ".file.bin.fresh.tmp"
    old.write_bytes(b"left by a kill")
    fresh.write_bytes(b"another writer, still working")
    long_ago = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(old, (long_ago, long_ago))
    assert write_atomically(target, b"payload") is None
    assert not old.exists() and fresh.exists()


def test_an_unwritable_target_is_reported_not_raised() -> None:
    failure = write_atomically(Path("/dev/null/cache/file.bin"), b"payload")
    assert isinstance(failure, OSError)


def test_file_digests_are_remembered_until_the_file_changes(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"version one")
    assert file_sha256(path) == hashlib.sha256(b"version one").hexdigest()
    [memo] = (cache / "digests").iterdir()
    recorded = json.loads(memo.read_text())
    # The memo is what answers next time: doctor it and the doctored digest comes back.
    memo.write_text(json.dumps({**recorded, "sha256": "remembered"}))
    assert file_sha256(path) == "remembered"
    path.write_bytes(b"version two, longer")  # new size and mtime: hashed again
    assert file_sha256(path) == hashlib.sha256(b"version two, longer").hexdigest()
    memo.write_text("{not json")
    assert file_sha256(path) == hashlib.sha256(b"version two, longer").hexdigest()


def test_the_graph_key_follows_the_files_that_shape_the_graph(cache: Path, tmp_path: Path) -> None:
    bundled = model_key(bundled_model_dir())
    assert model_key(model_copy(tmp_path / "same")) == bundled
    edited = model_copy(tmp_path / "edited", config_json={"layer_norm_eps": 1e-6})
    assert model_key(edited) != bundled
    retokenised = model_copy(tmp_path / "tokenizer")
    (retokenised / "tokenizer.json").write_text("{}")  # the tokenizer does not shape the graph
    assert model_key(retokenised) == bundled
    assert graph_path(bundled_model_dir(), bundled).name == f"all-MiniLM-L6-v2-{bundled}.onnx"


def test_first_use_builds_and_caches_the_graph_and_later_use_loads_it(cache: Path) -> None:
    first = OnnxEmbedder().embed_query("hello there")
    [graph] = (cache / "onnx").iterdir()
    assert graph == graph_path(bundled_model_dir(), model_key(bundled_model_dir()))
    built_at = graph.stat().st_mtime_ns
    onnx_embedder._SESSIONS.clear()
    np.testing.assert_allclose(OnnxEmbedder().embed_query("hello there"), first, atol=1e-6)
    assert graph.stat().st_mtime_ns == built_at  # loaded, not rebuilt


_FIRST_USE = """
import json, sys
from affect_memory.models.onnx_embedder import OnnxEmbedder
sys.stdin.read()  # wait for the start signal, so the processes build at the same moment
print(json.dumps(OnnxEmbedder().embed_documents(["hello there", "a second text"]).tolist()))
"""


def test_concurrent_first_uses_agree_and_leave_one_whole_graph(cache: Path) -> None:
    env = {**os.environ, CACHE_ENV: str(cache)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _FIRST_USE],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [worker.communicate("go", timeout=300) for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 4, [err for _, err in outputs]
    vectors = [np.array(json.loads(out)) for out, _ in outputs]
    for other in vectors[1:]:
        np.testing.assert_allclose(other, vectors[0], atol=1e-6)
    files = sorted(path.name for path in (cache / "onnx").iterdir())
    assert len(files) == 1 and files[0].endswith(".onnx"), files  # no temporary file left
    assert (cache / "onnx" / files[0]).read_bytes() == build_sentence_encoder(bundled_model_dir())


def test_an_unwritable_cache_still_embeds_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, embedder: OnnxEmbedder
) -> None:
    expected = embedder.embed_query("still works")
    monkeypatch.setenv(CACHE_ENV, "/dev/null/affect-memory")
    monkeypatch.setattr(onnx_embedder, "_SESSIONS", {})
    with caplog.at_level(logging.WARNING, logger="affect_memory.models.onnx_embedder"):
        vector = OnnxEmbedder().embed_query("still works")
        OnnxEmbedder().embed_query("and again, from the same session")
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1, warnings
    assert "cannot cache the ONNX graph in /dev/null/affect-memory/onnx" in warnings[0]
    assert f"set {CACHE_ENV} to a writable directory" in warnings[0]
    np.testing.assert_allclose(vector, expected, atol=1e-6)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_cached_graph_is_rebuilt_and_replaced(
    cache: Path, caplog: pytest.LogCaptureFixture, embedder: OnnxEmbedder, damage: str
) -> None:
    OnnxEmbedder().embed_query("build it")
    [graph] = (cache / "onnx").iterdir()
    whole = graph.read_bytes()
    damaged = {"truncated": whole[: len(whole) // 3], "garbage": b"\x00\xff" * 999, "empty": b""}
    graph.write_bytes(damaged[damage])
    onnx_embedder._SESSIONS.clear()
    with caplog.at_level(logging.WARNING, logger="affect_memory.models.onnx_embedder"):
        vector = OnnxEmbedder().embed_query("after the damage")
    messages = [record.getMessage() for record in caplog.records]
    assert any("does not load" in text and "rebuilding it" in text for text in messages)
    assert graph.read_bytes() == whole
    np.testing.assert_allclose(vector, embedder.embed_query("after the damage"), atol=1e-6)
