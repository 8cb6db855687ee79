"""``python -m affect_memory.cli``: the ``affect-memory`` command line, as
``python -m affect_memory`` is."""

from affect_memory.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
