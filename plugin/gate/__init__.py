"""The offline intent gate: a message's intent and whether to retrieve, from labelled exemplars.

In reading order: ``params`` (the gate's numbers), ``exemplars`` (the labelled texts),
``classifier`` (``EmbeddingIntentGate``) and ``evaluation`` (accuracy on a labelled set). When a
message asks for memory is ``affect_memory.cues``, shared with the turn's memory writes.
"""
