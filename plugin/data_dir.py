"""Where affect-memory keeps its files by default: ``$AFFECT_MEMORY_HOME`` or ``./.affect-memory``.

The embedded Chroma store is ``DATA_DIR/chroma`` and the embedded state store
``DATA_DIR/state.db``; the command line and the library read the default from here alone.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_DIR_ENV", "default_data_dir"]

DATA_DIR_ENV = "AFFECT_MEMORY_HOME"
"""Environment variable naming the default data directory."""


def default_data_dir() -> Path:
    """``$AFFECT_MEMORY_HOME`` or ``./.affect-memory``."""
    return Path(os.environ.get(DATA_DIR_ENV) or ".affect-memory")
