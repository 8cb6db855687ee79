"""Where the index's tables live: ``backend`` (the transaction and lock interface),
``schema`` (one set of tables and statements for both databases, and its migrations),
``sqlite_backend`` and ``postgres_backend``, and ``opening`` (which backend a store's
``--index`` setting names)."""
