"""Chroma itself: the client, the per-user collections and every call that reads or writes them.

In reading order: ``location`` and ``locks`` (where a store lives: an embedded path, held by
one process, or a ``chroma run`` server), ``layout`` (how users map to collections),
``collections`` (opening them, with the settings every collection gets), ``rows`` (the one
mapper from Chroma's columns to checked rows), ``writes`` (a batch written whole, its undo,
and the index's journal around it), ``segment_repair`` (rebuilding a segment a killed write
tore) and ``worker`` (the thread a store's async calls run in).
"""
