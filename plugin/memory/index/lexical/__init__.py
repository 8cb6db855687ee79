"""Words: ``analyzer`` (text to search terms), ``bm25`` (scoring postings) and ``search``
(a user's best BM25 matches, with the postings cache that serves them)."""
