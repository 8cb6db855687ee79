"""affect-memory plugin."""
