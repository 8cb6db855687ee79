"""Conversation state stores: state, transcript and outbox of each conversation, committed whole.

``sqlite`` serves one host (file locks, WAL); ``postgres`` serves many hosts (advisory locks on
a shared server). ``common`` holds what both write and read the same way.
"""
