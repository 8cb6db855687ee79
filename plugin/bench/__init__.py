"""Benchmarks behind ``affect-memory bench``; one module per sub-benchmark with ``register``."""

BENCHMARK_MODULES: tuple[str, ...] = (
    "engine",
    "fleet",
    "index",
    "ingest",
    "locomo",
    "longmemeval",
    "recall",
    "scoring",
    "serve",
    "startup",
    "users",
)
"""Sub-benchmark modules under ``affect_memory.bench``, in ``--help`` order."""
