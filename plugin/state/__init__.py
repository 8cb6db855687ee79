"""Conversation state stores: state, transcript and outbox of each conversation, committed whole.

``sqlite`` serves one host (file locks, WAL) with its ``sqlite_*`` parts; ``postgres`` serves
many hosts (advisory locks on a shared server) with its ``postgres_*`` parts. ``common`` holds
what both write and read the same way; ``user_links`` which users a conversation belongs to;
``turn_history`` the mood after each turn both keep, and how a user's conversations are read;
``location`` parses where a store lives. Connection pools and file locks are shared with the
memory index (``affect_memory.db``).
"""
