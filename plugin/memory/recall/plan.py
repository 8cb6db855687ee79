"""What a query asks for, as a typed plan: its time kind, the period it names, and whom it is about.

``LexiconAnalyser`` reads a query with one language's cue lexicon (``lexicon/<language>.json``,
data, not code) and returns a ``QueryPlan``:

* **subject**: ``user`` when the query mentions the store's owner, however it is written ("I",
  "my", "we", "you", "the user", "user", or the owner's name when the user id is one, like
  ``alice``: capitalised, or in any case in a query of lower case alone, as keywords are);
  ``other`` when it names somebody else (a capitalised word inside the sentence) and not the
  owner; ``none`` when it names nobody (keywords).
* **tense**: ``past`` for a past auxiliary (did, was, ...), a common irregular past verb with
  no perfect auxiliary, or a word in ``-ed`` with no present or perfect auxiliary ("passed",
  not "Am I married?", nor the lexicon's exceptions: "speed", "hundred"); ``present`` for a
  present auxiliary; else ``none``.
* **kind**, by these rules, first match wins:

  1. ``period``: the query names a period ("in May 2023", "last week");
  2. ``former``: a pointer to an earlier state ("used to", "previously", "my old ...") in a
     query not about somebody else; the tenseless ones ("before") count only outside the
     present tense ("What do I drink before work?" is about now);
  3. ``state``: an explicit state word (now, currently, still, these days, ...);
  4. ``event``: past tense, or a history cue (ago, ever, how many times; the tenseless ones
     outside the present tense);
  5. ``state``: about the user, or about nobody in particular;
  6. ``event``: about somebody else, with no state word.

So "Where do I work?", "Where does the user work?", "Where does Alice work?" (user ``alice``)
and "user work" get the same plan, and a past cue counts with or without a pronoun.

The plan also carries what matching uses: ``match_text``, the query without the owner's
mentions and its state words (the lexical search's words: "user" or a name would only match how
a memory is written, "now" only chatter, not what a memory says), and ``embed_texts``, the
query with the owner written each way a memory may write them (first person, "the user", the
name), whose embeddings recall averages weighted by how the user's own memories write the owner
(``form_weights``): a question is matched as the memories are written, whichever way the
question was asked.

The module is about 500 lines because the analyser's readings (subject, tense, period, kind) share
one lexicon and decide together which cue wins; split, that order could no longer be read in one
place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Literal, Protocol

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.index.lexical.analyzer import words
from affect_memory.memory.recall.lexicon import (
    load_lexicon,
    normal_phrase,
    phrase_alternation,
    word_list,
)
from affect_memory.memory.recall.periods import PeriodReader, period_reader

__all__ = [
    "OWNERS_KEPT",
    "LexiconAnalyser",
    "PlanKind",
    "QueryAnalyser",
    "QueryPlan",
    "Subject",
    "Tense",
    "default_analyser",
    "form_weights",
    "owner_name",
]

PlanKind = Literal["period", "state", "former", "event"]
Subject = Literal["user", "other", "none"]
Tense = Literal["past", "present", "none"]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What one query asks for: its time kind and why, whom it is about, and its match texts."""

    kind: PlanKind
    reason: str
    """One line naming the cue that chose the kind."""
    subject: Subject = "none"
    tense: Tense = "none"
    cues: tuple[str, ...] = ()
    """Every cue found, normalised (lower case, single spaces), in the order of the rules."""
    period: tuple[float, float] | None = None
    """The span a ``period`` query names, as epoch seconds (end exclusive)."""
    match_text: str = ""
    """The query's words for the lexical search: the owner's mentions and the state words
    removed (they say how to rank, not what a memory says)."""
    embed_texts: tuple[str, ...] = ()
    """The texts whose weighted mean embedding is the query's: one per way of writing the
    owner (``embed_forms``), or the query alone when it does not mention the owner."""
    embed_forms: tuple[str, ...] = ("query",)
    """The way each of ``embed_texts`` writes the owner (a key of the lexicon's
    ``owner_forms``: ``first``, ``third``, ``name``), or ``query`` for the query as written."""

    def __post_init__(self) -> None:
        """Refuse a plan whose texts to embed are missing or unnamed (a custom analyser's)."""
        if not self.embed_texts or len(self.embed_texts) != len(self.embed_forms):
            raise InvalidInputError(
                f"a QueryPlan needs one embed_forms entry per embed text, at least one: got "
                f"{len(self.embed_texts)} texts and {len(self.embed_forms)} forms"
            )

    def to_json(self) -> dict[str, object]:
        """The plan as a JSON object (the period as ISO dates)."""
        period = None
        if self.period is not None:
            period = [datetime.fromtimestamp(edge, UTC).isoformat() for edge in self.period]
        return {
            "kind": self.kind,
            "reason": self.reason,
            "subject": self.subject,
            "tense": self.tense,
            "cues": list(self.cues),
            "period": period,
        }


class QueryAnalyser(Protocol):
    """Turns a query into a plan: what recall's ranking is chosen by."""

    def plan(self, query: str, user_id: str, now: datetime) -> QueryPlan:
        """The plan of ``query`` asked of ``user_id``'s memories at ``now``."""
        ...

    def form_terms(self, user_id: str) -> dict[str, list[str]]:
        """The search terms that show a memory writes ``user_id``'s owner each third-person
        way (by the way's name in the plans' ``embed_forms``)."""
        ...


OWNERS_KEPT = 256
"""The most recent (language, user) pairs whose owner patterns and form terms are kept built
(one bound over every language)."""

_Owner = tuple[re.Pattern[str], re.Pattern[str] | None, str | None]
"""The owner's words, the owner's name forms (None: no name) and the name."""

_SPACE = re.compile(r"\s+")
_NAME_PART = re.compile(r"[^\W\d_]{2,}")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")
_SENTENCE_START = re.compile(r"(?:^|[.?!:;]\s+|[\"'(]\s*)$")


def owner_name(user_id: str) -> str | None:
    """The owner's name a user id spells (``alice`` -> ``Alice``, ``mary_jones`` -> ``Mary
    Jones``), or None for an id that is no name (digits, hex, a single letter)."""
    parts = re.split(r"[\s._-]+", user_id.strip())
    if not parts or not all(_NAME_PART.fullmatch(part) for part in parts):
        return None
    return " ".join(part.capitalize() for part in parts)


def _whole(words: Sequence[str]) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w'])(?:{phrase_alternation(words)})(?![\w'])", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Lexicon:
    """One language's cues, compiled."""

    state: re.Pattern[str]
    former: re.Pattern[str]
    former_modifiers: tuple[str, ...]
    past_aux: re.Pattern[str]
    history: re.Pattern[str]
    tense_neutral: frozenset[str]
    present_aux: re.Pattern[str]
    perfect_aux: re.Pattern[str]
    irregular_past: re.Pattern[str]
    regular_past: re.Pattern[str]
    not_past: tuple[tuple[str, ...], frozenset[str]]
    """Endings ("-eed": speed, breed) and words ("hundred") that look past but are not."""
    owner_roles: Mapping[str, str]
    """Each owner word ("{name}" for the owner's name) and its grammatical role."""
    owner_forms: Mapping[str, Mapping[str, str]]
    """Each way of writing the owner: the text of each role."""
    periods: PeriodReader
    """The language's date phrases (``periods``): the span a query names, and the month and
    weekday names (``calendar_words``: capitalised, yet nobody's name)."""


def _mapping(data: Mapping[str, object], key: str, where: str) -> dict[str, object]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise InvalidInputError(f"{where}: {key} must be an object, got {shown(value)}")
    return value


@cache
def _lexicon(language: str) -> _Lexicon:
    where = f"lexicon {language!r}"
    data = load_lexicon(language)
    suffix = data.get("past_suffix")
    stem = data.get("past_suffix_min_stem")
    if not isinstance(suffix, str) or not isinstance(stem, int):
        raise InvalidInputError(f"{where}: past_suffix and past_suffix_min_stem are required")
    roles = {
        str(word).lower(): str(role) for word, role in _mapping(data, "owner_words", where).items()
    }
    forms = {
        str(way): {str(role): str(text) for role, text in dict(texts).items()}  # type: ignore[call-overload]
        for way, texts in _mapping(data, "owner_forms", where).items()
    }
    return _Lexicon(
        state=_whole(word_list(data, "state_words", where)),
        former=_whole(word_list(data, "former_words", where)),
        former_modifiers=tuple(word_list(data, "former_modifiers", where)),
        past_aux=_whole(word_list(data, "past_auxiliaries", where)),
        history=_whole(word_list(data, "history_words", where)),
        tense_neutral=frozenset(map(normal_phrase, word_list(data, "tense_neutral", where))),
        present_aux=_present_pattern(word_list(data, "present_auxiliaries", where)),
        perfect_aux=_present_pattern(word_list(data, "perfect_auxiliaries", where)),
        irregular_past=_whole(word_list(data, "irregular_past", where)),
        regular_past=re.compile(rf"\b[^\W\d_]{{{stem},}}{re.escape(suffix)}\b", re.IGNORECASE),
        not_past=(
            tuple(word_list(data, "not_past_endings", where)),
            frozenset(word_list(data, "not_past_words", where)),
        ),
        owner_roles=roles,
        owner_forms=forms,
        periods=period_reader(language),
    )


def _present_pattern(words: Sequence[str]) -> re.Pattern[str]:
    """Auxiliaries, where a clitic ("'s", "'ve") matches at a word's end ("what's", "I've")."""
    clitics = [word for word in words if word.startswith("'")]
    whole = [word for word in words if not word.startswith("'")]
    parts = [rf"(?<![\w'])(?:{phrase_alternation(whole)})(?![\w'])"] if whole else []
    if clitics:
        parts.append(rf"(?<=\w)(?:{phrase_alternation(clitics)})\b")
    return re.compile("|".join(parts), re.IGNORECASE)


class LexiconAnalyser:
    """The query analyser of one language's lexicon (``lexicon/<language>.json``)."""

    def __init__(self, language: str = "en") -> None:
        """Read ``language``'s lexicon (English by default); refuse one that is not shipped."""
        self._lexicon = _lexicon(language)
        self.language = language

    def _owner(self, user_id: str) -> _Owner:
        """``_owner_patterns`` of ``user_id`` in this analyser's language."""
        return _owner_patterns(self.language, user_id)

    def plan(self, query: str, user_id: str, now: datetime) -> QueryPlan:
        """The plan of ``query`` asked of ``user_id``'s memories at ``now`` (module doc)."""
        lex = self._lexicon
        owner, named, name = self._owner(user_id)
        # "US" in capitals is the country, not "us"
        mentions = [found for found in owner.finditer(query) if found.group(0) != "US"]
        if named is not None:
            keywords = query == query.lower()
            pattern = re.compile(named.pattern, re.IGNORECASE) if keywords else named
            found = sorted([*mentions, *pattern.finditer(query)], key=lambda m: m.start())
            mentions = _disjoint(found)
        subject: Subject = "user" if mentions else ("other" if self._other(query, name) else "none")
        texts = self._forms(query, mentions, name)
        # the owner and the state words say how to rank, not what the memory says
        said = sorted([*mentions, *self._lexicon.state.finditer(query)], key=lambda m: m.start())
        match_text = _SPACE.sub(" ", _cut(query, _disjoint(said))).strip()
        period = lex.periods.span(query, now)
        tense, tense_cue = self._tense(query)
        present = tense == "present"
        former = self._former(query, mentions, present)
        state = lex.state.search(query)
        state_cue = None if state is None else normal_phrase(state.group(0))
        history = self._history(query, present)
        cues = tuple(
            dict.fromkeys(
                cue
                for cue in ("period" if period else None, former, state_cue, tense_cue, history)
                if cue is not None
            )
        )

        def planned(kind: PlanKind, reason: str) -> QueryPlan:
            return QueryPlan(
                kind,
                reason,
                subject,
                tense,
                cues,
                period,
                match_text or query,
                tuple(texts.values()),
                tuple(texts),
            )

        if period is not None:
            return planned("period", "names a period")
        if former is not None and subject != "other":
            return planned("former", f"earlier state ({former!r})")
        if state_cue is not None:
            return planned("state", f"state word {state_cue!r}")
        if tense == "past":
            return planned("event", f"past tense ({tense_cue!r})")
        if history is not None:
            return planned("event", f"history cue {history!r}")
        if subject == "other":
            return planned("event", "about someone else, no state word")
        about = "about the user" if subject == "user" else "about no one in particular"
        return planned("state", f"{about}, no past cue")

    def _tense(self, query: str) -> tuple[Tense, str | None]:
        lex = self._lexicon
        found = lex.past_aux.search(query)
        if found is not None:
            return "past", normal_phrase(found.group(0))
        perfect = lex.perfect_aux.search(query) is not None
        present = lex.present_aux.search(query)
        if not perfect:
            found = lex.irregular_past.search(query)
            if found is not None:
                return "past", normal_phrase(found.group(0))
            if present is None:
                endings, exceptions = lex.not_past
                for found in lex.regular_past.finditer(query):
                    word = found.group(0).lower()
                    if word not in exceptions and not word.endswith(endings):
                        return "past", word
        if present is not None:
            return "present", None
        return "none", None

    def _former(self, query: str, mentions: Sequence[re.Match[str]], present: bool) -> str | None:
        lex = self._lexicon
        for found in lex.former.finditer(query):
            cue = normal_phrase(found.group(0))
            if not (present and cue in lex.tense_neutral):
                return cue
        for mention in mentions:  # "my old job", "the user's previous car", "Alice's first"
            if lex.owner_roles.get(self._role_key(mention.group(0))) != "possessive":
                continue
            after = query[mention.end() :].split()
            if after and after[0].lower().strip(",.?!") in lex.former_modifiers:
                return f"{normal_phrase(mention.group(0))} {after[0].lower().strip(',.?!')}"
        return None

    def _history(self, query: str, present: bool) -> str | None:
        lex = self._lexicon
        for found in lex.history.finditer(query):
            cue = normal_phrase(found.group(0))
            if not (present and cue in lex.tense_neutral):
                return cue
        return None

    def _other(self, query: str, name: str | None) -> bool:
        """Whether ``query`` names somebody other than the owner: a capitalised word that
        does not open the sentence and is no owner's name, month or weekday."""
        owner = set() if name is None else {part.lower() for part in name.split()}
        for found in _CAPITALISED.finditer(query):
            word = found.group(0).removesuffix("'s").lower()
            if _SENTENCE_START.search(query[: found.start()]):
                continue
            if word in owner or word in self._lexicon.periods.calendar_words or word == "i":
                continue
            return True
        return False

    def _role_key(self, text: str) -> str:
        key = normal_phrase(text)
        if key in self._lexicon.owner_roles:
            return key
        return "{name}'s" if key.endswith("'s") else "{name}"

    def _forms(
        self, query: str, mentions: Sequence[re.Match[str]], name: str | None
    ) -> dict[str, str]:
        """The query with its owner mentions written each way (first person, third, the
        name), by the way's name; the query alone (``query``) when it mentions no owner."""
        if not mentions:
            return {"query": query}
        texts: dict[str, str] = {}
        for way, roles in self._lexicon.owner_forms.items():
            if any("{name}" in text for text in roles.values()) and name is None:
                continue
            pieces: list[str] = []
            last = 0
            for mention in mentions:
                role = self._lexicon.owner_roles[self._role_key(mention.group(0))]
                pieces += [query[last : mention.start()], roles[role].replace("{name}", name or "")]
                last = mention.end()
            pieces.append(query[last:])
            texts[way] = "".join(pieces)
        return texts

    def form_terms(self, user_id: str) -> dict[str, list[str]]:
        """The search terms that show a memory writes its owner each third-person way: the
        lexicon's ``third`` form ("user") and the owner's name, when the user id spells one."""
        return {way: list(terms) for way, terms in _form_terms(self.language, user_id)}


# A recall plans every query with its user's owner patterns and form terms: each is built once
# and kept for the last OWNERS_KEPT (language, user) pairs.


@lru_cache(maxsize=OWNERS_KEPT)
def _owner_patterns(language: str, user_id: str) -> _Owner:
    """The owner's words (any case) and name forms (as a name is written: capitalised, or in a
    query of lower case alone, as keywords are), and the owner's name; a user id that spells a
    month or weekday names nobody ("May" is the month)."""
    lex = _lexicon(language)
    name = owner_name(user_id)
    calendar_words = lex.periods.calendar_words
    if name is not None and any(part.lower() in calendar_words for part in name.split()):
        name = None
    words = [word for word in lex.owner_roles if "{name}" not in word]
    if name is None:
        return _whole(words), None, None
    forms = [
        word.replace("{name}", part)
        for word in lex.owner_roles
        if "{name}" in word
        for part in {name, *name.split()}
    ]
    alternation = phrase_alternation(forms)
    return _whole(words), re.compile(rf"(?<![\w'])(?:{alternation})(?![\w'])"), name


@lru_cache(maxsize=OWNERS_KEPT)
def _form_terms(language: str, user_id: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``LexiconAnalyser.form_terms``, kept immutable: each way and its search terms."""
    name = owner_name(user_id)
    found: list[tuple[str, tuple[str, ...]]] = []
    for way, roles in _lexicon(language).owner_forms.items():
        text = roles.get("subject", "")
        if "{name}" in text:
            if name is None:
                continue
            text = text.replace("{name}", name)
        terms = words(text)
        if terms and way != "first":
            found.append((way, tuple(terms)))
    return tuple(found)


def _disjoint(matches: Sequence[re.Match[str]]) -> list[re.Match[str]]:
    """``matches`` (sorted by start) without those overlapping an earlier one."""
    kept: list[re.Match[str]] = []
    for found in matches:
        if not kept or found.start() >= kept[-1].end():
            kept.append(found)
    return kept


def _cut(query: str, mentions: Sequence[re.Match[str]]) -> str:
    """``query`` without the ``mentions`` (each replaced by a space)."""
    pieces, last = [], 0
    for mention in mentions:
        pieces += [query[last : mention.start()], " "]
        last = mention.end()
    return "".join([*pieces, query[last:]])


def form_weights(
    forms: Sequence[str],
    terms: Mapping[str, Sequence[str]],
    memories: int,
    holding: Mapping[str, int],
) -> list[float]:
    """How much each way of writing the owner weighs in a query's embedding: the share of the
    user's ``memories`` written that way (a third-person way's share is that of its most
    frequent search term, ``terms`` of ``form_terms``, counted in ``holding``; first person is
    the rest), so a question is matched as the memories are written. ``query`` (no owner
    mentioned) weighs 1; with no memories every way weighs alike."""
    if memories <= 0:
        return [1.0] * len(forms)
    shares = {
        way: min(1.0, max(holding.get(term, 0) for term in group) / memories)
        for way, group in terms.items()
        if group
    }
    shares["first"] = max(0.0, 1.0 - sum(shares.values()))
    weights = [1.0 if way == "query" else shares.get(way, 0.0) for way in forms]
    return weights if sum(weights) > 0 else [1.0] * len(forms)


@cache
def default_analyser() -> LexiconAnalyser:
    """The English analyser recall uses unless given another."""
    return LexiconAnalyser("en")
