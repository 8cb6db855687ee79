"""Doors for other tools: an MCP server over stdio and a LangChain retriever (optional extras)."""
