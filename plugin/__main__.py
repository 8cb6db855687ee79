"""``python -m plugin``: the ``affect-memory`` command line."""

from plugin.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
