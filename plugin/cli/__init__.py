"""The ``affect-memory`` command line: the dispatcher, one module per command, the demo.

``main`` is the console entry point (``affect-memory = "plugin.cli:main"``).
"""

from plugin.cli.main import main

__all__ = ["main"]
