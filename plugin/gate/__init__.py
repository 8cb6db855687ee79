"""The offline intent gate: a message's intent and whether to retrieve, from labelled exemplars.

In reading order: ``params`` (the gate's numbers), ``cues`` (when a message asks for memory),
``exemplars`` (the labelled texts), ``classifier`` (``EmbeddingIntentGate``) and ``evaluation``
(accuracy on a labelled set).
"""
