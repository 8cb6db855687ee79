"""Models the plugin talks to: text embeddings, and chat models behind an OpenAI-compatible API."""
