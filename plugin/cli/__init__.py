"""The ``affect-memory`` command line: the dispatcher, one module per command, the demo.

``main`` is the console entry point (``affect-memory = "affect_memory.cli:main"``).
"""

from affect_memory.cli.main import main

__all__ = ["main"]
