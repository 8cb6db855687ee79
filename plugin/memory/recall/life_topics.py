"""Which part of a person's life a text is about, as a soft topic, for current-state questions.

A question about the present and the update that answers it often share no words and little
cosine ("What do I do for a living?" and "They took me on as a trainee chef in the hotel
kitchen.": 0.20), while unrelated recent chatter scores as high ("I'm doing an online course
in the evenings.": 0.29). Both the question and the update are, though, about
the same part of a life (work), and the small embedding model tells that apart better than
it matches a question to its answer. So the current-state rule adds to a memory's cosine
the settings' ``topic_weight`` times its *topic agreement* with the query.

``LIFE_TOPICS`` (the lexicon's ``life_topics``, ``affect_memory.memory.recall.lexicon``) is a
generic, hand-written list of life domains (home, work, partner, food,
health, transport, ...), each described by a few short phrases, written from general
knowledge rather than from any data set's questions. A text's topic is the softmax of its
cosine with each domain's prototype (the unit mean of its phrases' embeddings) at the
settings' ``topic_temperature``; the agreement of two texts is the dot product of their
topics: near 1 when both are surely about one domain, near 0 when they are about different
ones. The
prototypes are embedded once by the store's own embedder, so any model works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from affect_memory.memory.recall.lexicon import load_lexicon
from affect_memory.models.embeddings import Embedder, check_embeddings, group_centroids

__all__ = ["LIFE_TOPICS", "TopicSpace", "topic_phrases"]

FloatArray = npt.NDArray[np.float64]

LIFE_TOPICS: Mapping[str, tuple[str, ...]] = {
    name: tuple(phrases) for name, phrases in load_lexicon("en")["life_topics"].items()
}
"""Life domains and the phrases that describe each (generic English, no names or data)."""


def topic_phrases() -> list[str]:
    """Every phrase of ``LIFE_TOPICS``, domain by domain (what ``TopicSpace.of`` embeds)."""
    return [phrase for phrases in LIFE_TOPICS.values() for phrase in phrases]


@dataclass(frozen=True, slots=True)
class TopicSpace:
    """The life domains' prototypes as one embedder places them (unit rows, one per domain)."""

    names: tuple[str, ...]
    prototypes: npt.NDArray[np.float32]
    """Unit rows, one per domain, in float32: the products with them are taken in float32, so
    that a vector gets the same topic whether it was read as float32 or widened to float64."""

    @classmethod
    def of(cls, embedder: Embedder) -> TopicSpace:
        """Embed ``LIFE_TOPICS``'s phrases with ``embedder`` and average each domain's."""
        phrases = topic_phrases()
        vectors = _unit(check_embeddings(embedder.embed_documents(phrases), len(phrases)))
        ends = np.cumsum([len(phrases_of) for phrases_of in LIFE_TOPICS.values()]).tolist()
        bounds = list(zip([0, *ends[:-1]], ends, strict=True))
        prototypes = group_centroids(vectors, bounds).astype(np.float32)
        return cls(tuple(LIFE_TOPICS), prototypes)

    @property
    def dimension(self) -> int:
        """The embedder's dimension: vectors of another length have no topic here."""
        return int(self.prototypes.shape[1])

    def topics(self, vectors: npt.ArrayLike, temperature: float) -> FloatArray:
        """Each vector's distribution over the domains at ``temperature`` (rows sum to 1)."""
        array = np.asarray(vectors, dtype=np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", array, array)).astype(np.float64)
        # the cosines, scaled after the product (a pool's vectors are many, the domains few)
        products = (array @ self.prototypes.T).astype(np.float64)
        logits = products / (np.where(norms > 0, norms, 1.0)[:, None] * temperature)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        shares: FloatArray = weights / weights.sum(axis=1, keepdims=True)
        return shares

    def agreement(
        self, query: npt.ArrayLike, members: npt.ArrayLike, temperature: float
    ) -> tuple[FloatArray, str]:
        """How surely each of ``members`` is about the same domain as ``query``, in [0, 1],
        and the domain ``query`` most likely is about (for the hit's explanation), with
        topics at ``temperature``."""
        query_topic = self.topics(np.asarray(query)[None, :], temperature)[0]
        main = self.names[int(np.argmax(query_topic))]
        rows = np.asarray(members)
        if not len(rows):
            return np.zeros(0, dtype=np.float64), main
        agreed: FloatArray = np.clip(self.topics(rows, temperature) @ query_topic, 0.0, 1.0)
        return agreed, main


def _unit(vectors: FloatArray | Sequence[Sequence[float]]) -> FloatArray:
    array = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    unit: FloatArray = array / np.where(norms > 0, norms, 1.0)
    return unit
