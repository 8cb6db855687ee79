"""What a committed turn owes the memory: ``effects`` (``MemoryTurnEffects``, the engine's
hook that decides a turn's memory writes and puts them in the state store's outbox) and
``writes`` (applying one outbox entry exactly once: the new memory and the recall counts of
what the turn surfaced); ``user_engine`` builds the engine of one user's conversation with both.
"""
