"""``python -m affect_memory``: the ``affect-memory`` command line."""

from affect_memory.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
