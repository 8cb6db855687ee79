"""``python -m plugin.cli``: the ``affect-memory`` command line, as ``python -m plugin`` is."""

from plugin.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
