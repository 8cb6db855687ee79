"""A seeded synthetic personal-memory corpus with labelled queries, for real-embedding experiments.

Each user gets the same kinds of memory with different details, so one user's facts never
answer another's questions:

* ``stale vs current`` — an old fact and a recent one that supersedes it (moved city, new
  job); the query asks for the present, so the recent memory is the answer;
* ``old but true`` — a long-standing fact (a birthday, an allergy) and a recent, chattier
  memory on the same topic that does not answer the question;
* ``emotional`` — a significant, strongly valenced episode and a recent neutral memory about
  the same subject, queried under a mood of the episode's sign;
* filler — everyday memories at random ages, the haystack.

Texts are English templates filled per user; ages, significance and recall counts are drawn
from the seed. ``now`` is fixed so ages are reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

import numpy as np

from affect_memory.experiments.data import LabelledQuery
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.memory.records import MemoryRecord

if TYPE_CHECKING:
    from affect_memory.memory.results import RecallHit

__all__ = [
    "CORPUS_NOW",
    "Category",
    "Corpus",
    "CorpusQuery",
    "build_corpus",
    "candidates_from_hits",
    "labelled_from_candidates",
]

Category = Literal["stale vs current", "old but true", "emotional"]
CORPUS_NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
"""The moment every query is asked at."""

_SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class CorpusQuery:
    """A question one user asks, the id of the memory answering it, and the mood it is asked in."""

    text: str
    user_id: str
    relevant_id: str
    category: Category
    mood_valence: float = 0.0


@dataclass(frozen=True, slots=True)
class Corpus:
    """Memory records for several users and the labelled queries over them."""

    records: tuple[MemoryRecord, ...]
    queries: tuple[CorpusQuery, ...]
    now: datetime = CORPUS_NOW


# (old memory, new memory, questions); {a} and {b} are the user's old and new detail.
_UPDATES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("city", "I live in {a} and I love my flat there.",
     "I moved to {b} last week and I'm still unpacking boxes.",
     ("Which city do I live in?", "Where is my home these days?")),
    ("job", "I work as a {a} at a small company.",
     "I started a new job this month; I'm a {b} now.",
     ("What do I do for a living?", "What is my job?")),
    ("partner", "I'm in a relationship with {a}.",
     "{a} and I split up; I've been seeing {b} for a few weeks.",
     ("Who am I dating?", "Who is my partner?")),
    ("exercise", "I go {a} every morning before work.",
     "I stopped my old routine because of my knee; these days I go {b} instead.",
     ("What exercise do I do?", "How do I keep fit?")),
    ("car", "I drive a {a} to work.",
     "I sold my old car and bought a {b}.",
     ("What car do I drive?", "Which car do I have?")),
    ("instrument", "I'm learning to play the {a}.",
     "I gave up my old lessons and now I'm learning the {b}.",
     ("Which instrument am I learning?", "What music lessons am I taking?")),
)

# (fact, recent distractor on the topic, questions); {a} is the user's detail.
_EVERGREEN: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("birthday", "My birthday is on {a}.",
     "We celebrated a colleague's birthday at the office today with cake.",
     ("When is my birthday?", "What date is my birthday?")),
    ("allergy", "I'm allergic to {a}; I carry an antihistamine everywhere.",
     "I read an article about allergy season and sneezed all afternoon.",
     ("What am I allergic to?", "Do I have any allergies?")),
    ("mother", "My mother's name is {a}.",
     "My mother phoned to ask whether I'm coming for dinner on Sunday.",
     ("What is my mother's name?", "What is my mom called?")),
    ("school", "I grew up in {a} and went to school there.",
     "I drove past a school today and it made me think of childhood.",
     ("Where did I grow up?", "Which town is my hometown?")),
)

# (episode, neutral recent memory, questions, valence sign).
_EMOTIONAL: tuple[tuple[str, str, str, tuple[str, ...], float], ...] = (
    ("grandfather", "I cried all day at {a}'s funeral; I still miss him terribly.",
     "{a}'s old watch needs a new battery.",
     ("What do I remember about {a}?", "How do I feel about {a}?"), -1.0),
    ("promotion", "Getting promoted to lead the {a} team was the proudest day of my year.",
     "I have a routine check-in with the {a} team next week.",
     ("How have things gone with the {a} team?", "What happened at work with {a}?"), 1.0),
    ("driving", "I panicked during my driving test in {a} and failed it; I felt humiliated.",
     "I need to renew my car insurance before the trip to {a}.",
     ("What happened with driving in {a}?", "Tell me about {a} and driving."), -1.0),
    ("wedding", "Our wedding in {a} was perfect; I have never felt so loved.",
     "My cousin asked me for venue ideas near {a}.",
     ("What do I remember about {a}?", "Tell me about the wedding in {a}."), 1.0),
)

_FILLER: tuple[str, ...] = (
    "I had pasta with mushrooms for dinner.",
    "I watched a documentary about whales.",
    "The train was twenty minutes late this morning.",
    "I bought a new pair of running socks.",
    "It rained all weekend so I stayed in and read.",
    "I fixed the squeaky door in the hallway.",
    "My neighbour lent me a ladder.",
    "I tried a new coffee place near the station.",
    "I spent the evening sorting old photos.",
    "I planted tomatoes on the balcony.",
    "I finished a thousand-piece jigsaw puzzle.",
    "My laptop needed a software update that took an hour.",
    "I went to a pub quiz and we came third.",
    "I cooked a curry that was far too spicy.",
    "I forgot my umbrella and got soaked.",
    "I cleaned out the fridge.",
    "I listened to a podcast about ancient Rome.",
    "I walked along the river at sunset.",
    "I ordered a book about bird watching.",
    "I repainted the kitchen chairs.",
    "I binge-watched a detective series.",
    "I baked banana bread with overripe bananas.",
    "I lost my keys and found them in the fridge.",
    "I helped a friend move a sofa.",
)

# One tuple of details per user: updates (old, new) in _UPDATES order, then evergreen, then
# emotional subjects.
_USERS: dict[str, dict[str, tuple[str, ...]]] = {
    "ana": {
        "updates": ("Berlin", "Lisbon", "nurse", "data analyst", "Marco", "Priya",
                    "running", "swimming", "red hatchback", "grey estate", "guitar", "cello"),
        "evergreen": ("the 3rd of March", "peanuts", "Rosa", "Porto"),
        "emotional": ("Grandpa Joe", "design", "Leeds", "Sintra"),
    },
    "ben": {
        "updates": ("Manchester", "Glasgow", "chef", "teacher", "Lena", "Omar",
                    "cycling", "rowing", "blue pickup", "white van", "drums", "violin"),
        "evergreen": ("the 19th of July", "shellfish", "Margaret", "Cardiff"),
        "emotional": ("Grandad Ted", "logistics", "York", "Bath"),
    },
    "chloe": {
        "updates": ("Paris", "Montreal", "lawyer", "baker", "Hugo", "Sam",
                    "to yoga", "climbing", "silver saloon", "green convertible", "flute",
                    "saxophone"),
        "evergreen": ("the 28th of November", "cats", "Sylvie", "Lyon"),
        "emotional": ("Papi Louis", "research", "Nantes", "Provence"),
    },
    "dev": {
        "updates": ("Mumbai", "Toronto", "accountant", "pilot", "Asha", "Neil",
                    "to the gym", "hiking", "black scooter", "yellow taxi", "sitar",
                    "keyboard"),
        "evergreen": ("the 1st of January", "penicillin", "Kavita", "Pune"),
        "emotional": ("Dadaji Ravi", "sales", "Delhi", "Goa"),
    },
}


def _stamp(now: datetime, days: float) -> str:
    return (now - timedelta(days=float(days))).isoformat()


def build_corpus(*, seed: int, filler_per_user: int = 24, now: datetime = CORPUS_NOW) -> Corpus:
    """Records and labelled queries for four users; the same seed gives the same corpus."""
    if not 0 <= filler_per_user <= len(_FILLER):
        raise InvalidInputError(f"filler_per_user must be within [0, {len(_FILLER)}]")
    rng = np.random.default_rng([seed, 2])
    records: list[MemoryRecord] = []
    queries: list[CorpusQuery] = []

    def add(user: str, key: str, text: str, days: float, significance: float, *,
            episode: bool = False, valence: float = 0.0) -> str:
        memory_id = f"{user}-{key}"
        records.append(MemoryRecord(
            id=memory_id, text=text, user_id=user, timestamp=_stamp(now, days),
            significance=round(significance, 3), episode=episode,
            emotional_valence=round(valence, 3), recall_count=int(rng.poisson(1.0)),
        ))
        return memory_id

    for user, details in _USERS.items():
        updates = details["updates"]
        for index, (key, old, new, questions) in enumerate(_UPDATES):
            a, b = updates[2 * index], updates[2 * index + 1]
            add(user, f"{key}-old", old.format(a=a), rng.uniform(120, 400), rng.uniform(0.4, 0.7))
            current = add(user, f"{key}-new", new.format(a=a, b=b), rng.uniform(1, 20),
                          rng.uniform(0.4, 0.7))
            queries.extend(CorpusQuery(q, user, current, "stale vs current") for q in questions)
        for (key, fact, chatter, questions), a in zip(_EVERGREEN, details["evergreen"],
                                                      strict=True):
            answer = add(user, key, fact.format(a=a), rng.uniform(200, 500), rng.uniform(0.5, 0.8))
            add(user, f"{key}-chatter", chatter, rng.uniform(0, 10), rng.uniform(0.1, 0.4))
            queries.extend(CorpusQuery(q, user, answer, "old but true") for q in questions)
        for (key, episode, neutral, questions, sign), a in zip(_EMOTIONAL, details["emotional"],
                                                               strict=True):
            answer = add(user, key, episode.format(a=a), rng.uniform(60, 200),
                         rng.uniform(0.85, 1.0), episode=True,
                         valence=sign * rng.uniform(0.7, 1.0))
            add(user, f"{key}-neutral", neutral.format(a=a), rng.uniform(0, 14),
                rng.uniform(0.1, 0.4), valence=rng.uniform(-0.1, 0.1))
            for question in questions:
                mood = sign * float(rng.uniform(0.4, 0.9))
                queries.append(CorpusQuery(question.format(a=a), user, answer, "emotional",
                                           round(mood, 3)))
        for index in rng.choice(len(_FILLER), filler_per_user, replace=False):
            add(user, f"filler-{index}", _FILLER[index], rng.uniform(0, 365),
                rng.uniform(0.1, 0.5), episode=bool(rng.random() < 0.15),
                valence=rng.uniform(-0.5, 0.5))
    return Corpus(tuple(records), tuple(queries), now)


def labelled_from_candidates(
    candidates: Sequence[MemoryCandidate],
    relevant_id: str,
    *,
    now: datetime,
    mood_valence: float = 0.0,
) -> LabelledQuery | None:
    """One retrieved candidate list as a ``LabelledQuery``; None if the answer was not retrieved.

    Candidates without a timestamp are refused: the experiment scorers need every age.
    """
    ids = [candidate.id for candidate in candidates]
    if relevant_id not in ids:
        return None
    ages = []
    for candidate in candidates:
        if candidate.timestamp is None:
            raise InvalidInputError(f"candidate {candidate.id!r} has no timestamp")
        moment = datetime.fromisoformat(candidate.timestamp)
        ages.append((now - moment).total_seconds() / _SECONDS_PER_DAY)
    return LabelledQuery(
        distances=np.array([candidate.distance for candidate in candidates]),
        ages_days=np.array(ages),
        significance=np.array([candidate.significance for candidate in candidates]),
        recall_counts=np.array([c.recall_count for c in candidates], dtype=np.int64),
        episodes=np.array([candidate.episode for candidate in candidates], dtype=np.bool_),
        memory_valences=np.array([candidate.emotional_valence for candidate in candidates]),
        relevant=ids.index(relevant_id),
        mood_valence=mood_valence,
    )


def candidates_from_hits(hits: Sequence[RecallHit]) -> tuple[MemoryCandidate, ...]:
    """The candidates behind ``ChromaMemory.recall`` hits, to rescore them offline.

    A hit records the episode *bonus*, not the flag, so recall must have used a positive
    ``episode_bonus`` (the default does) for ``episode`` to be recovered.
    """
    return tuple(
        MemoryCandidate(
            id=hit.id,
            text=hit.text,
            distance=hit.distance,
            timestamp=hit.timestamp,
            significance=hit.significance,
            recall_count=hit.recall_count,
            episode=hit.episode > 0,
            emotional_valence=hit.emotional_valence,
        )
        for hit in hits
    )
