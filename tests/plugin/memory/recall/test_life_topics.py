"""Life topics: the domains' prototypes as the real model places them, and how a question's
topic agrees with the memories that answer it when they share no words."""

from __future__ import annotations

import numpy as np
import pytest

from affect_memory.memory.recall.life_topics import LIFE_TOPICS, TopicSpace, topic_phrases
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS
from affect_memory.models.embeddings import Embedder

T = DEFAULT_RECALL_SETTINGS.topic_temperature
"""The topics' softmax temperature recall uses."""


@pytest.fixture(scope="module")
def space(embedder: Embedder) -> TopicSpace:
    return TopicSpace.of(embedder)


def test_the_space_has_one_unit_prototype_per_domain(space: TopicSpace) -> None:
    assert space.names == tuple(LIFE_TOPICS)
    assert space.prototypes.shape == (len(LIFE_TOPICS), 384) and space.dimension == 384
    assert np.linalg.norm(space.prototypes, axis=1) == pytest.approx(np.ones(len(LIFE_TOPICS)))
    assert len(topic_phrases()) == sum(len(phrases) for phrases in LIFE_TOPICS.values())


def test_topics_are_distributions_whatever_the_vectors_length(space: TopicSpace) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(5, 384)) * np.array([[1.0], [3.0], [0.01], [10.0], [1.0]])
    shares = space.topics(vectors, T)
    assert shares.shape == (5, len(LIFE_TOPICS))
    assert shares.sum(axis=1) == pytest.approx(np.ones(5))
    assert (shares >= 0).all()
    # scaling a vector does not change its topic (cosines are taken)
    assert space.topics(vectors[1:2] * 7.0, T) == pytest.approx(shares[1:2])


@pytest.mark.parametrize(
    ("question", "answer", "elsewhere"),
    [
        (
            "What do I do for a living?",
            "They took me on as a trainee chef in the hotel kitchen.",
            "We brought home a three-legged dog from the shelter.",
        ),
        (
            "Where do I live?",
            "I signed the lease on a flat by the harbour.",
            "I have started taking piano lessons on Tuesdays.",
        ),
        (
            "How do I get to work?",
            "I sold the car and bought a folding bike.",
            "My sister had a baby girl last night.",
        ),
        (
            "Who is my partner?",
            "Sam and I have been together since the spring.",
            "I switched to decaf after lunch.",
        ),
        (
            "What do I drink in the morning?",
            "I switched to decaf after lunch.",
            "Sam and I have been together since the spring.",
        ),
    ],
)
def test_a_question_agrees_more_with_its_answer_than_with_another_domain(
    space: TopicSpace, embedder: Embedder, question: str, answer: str, elsewhere: str
) -> None:
    query, *members = embedder.embed_documents([question, answer, elsewhere])
    agreed, _ = space.agreement(query, np.stack(members), T)
    assert agreed[0] > agreed[1] + 0.2, (question, agreed.tolist())
    assert ((agreed >= 0) & (agreed <= 1)).all()


def test_agreement_is_symmetric_and_empty_members_agree_with_nothing(
    space: TopicSpace, embedder: Embedder
) -> None:
    first, second = embedder.embed_documents(["Where do I live?", "I moved to a new town."])
    (there,), topic = space.agreement(first, second[None, :], T)
    (back,), _ = space.agreement(second, first[None, :], T)
    assert there == pytest.approx(back, abs=1e-9)
    assert topic == "home"
    none, topic = space.agreement(first, np.zeros((0, 384)), T)
    assert none.shape == (0,) and topic == "home"
    # a vector read as float32 or widened to float64 gets the same bits
    widened, _ = space.agreement(first, np.stack([second, first]).astype(np.float64), T)
    narrow, _ = space.agreement(first, np.stack([second, first]).astype(np.float32), T)
    assert widened.tolist() == narrow.tolist()
