"""Shared test configuration."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

if not os.environ.get("AFFECT_MEMORY_CACHE"):
    # The ONNX graph and exemplar vectors are built once per session (and by the CLI processes
    # the tests start, which inherit this), never into the developer's own ~/.cache.
    _cache = tempfile.mkdtemp(prefix="affect-memory-test-cache-")
    os.environ["AFFECT_MEMORY_CACHE"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

if not os.environ.get("AFFECT_MEMORY_HOME"):
    # The default data directory (where a Chroma server's default memory index lives), never
    # the working directory's ./.affect-memory.
    _home = tempfile.mkdtemp(prefix="affect-memory-test-home-")
    os.environ["AFFECT_MEMORY_HOME"] = _home
    atexit.register(shutil.rmtree, _home, ignore_errors=True)

# A developer's own state store ($AFFECT_MEMORY_STATE, maybe a shared PostgreSQL) is never
# written by the suite: commands under test fall back to DATA_DIR/state.db, a temporary file.
os.environ.pop("AFFECT_MEMORY_STATE", None)
