"""Tools an operator runs on a whole store, never on a turn's path: ``migrate`` (the old
shared collection into per-user ones) and ``adopt`` (another tool's collection, read or
imported). Only the CLI and the public package root import them.
"""
