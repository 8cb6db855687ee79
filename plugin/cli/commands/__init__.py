"""One module per ``affect-memory`` sub-command, each exposing ``register(subparsers)``."""
