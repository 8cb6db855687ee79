"""The memory index and Chroma hold the same memories whatever sequence of writes runs, and
however a writer dies: a stateful property test against a model of what each user holds.

A real embedded ``ChromaMemory`` with a SQLite index (a fixed hashing embedder, no model)
runs adds, upserts, forgets, turn writes (and their replays), erasures and simulated kills,
and reopens; after every step the index must hold exactly Chroma's ids and texts per user
(``checks.assert_consistent``), Chroma exactly the model's, every recall count the model's,
and recall only the user's own memories.

A kill is simulated in process at a chosen step, as ``crash_worker.py`` kills a real one:
the step raises ``Killed``, nothing a dead process could not run runs after it (no undo, no
reconciling of the open journal entries), and then either the store is closed and opened
again, as the next process would, or the store goes on, as another process sharing it would.
Real kills (SIGKILL, and Chroma's own files) are ``test_crash.py``'s. Each example runs in a
fresh temporary directory; about 30 s for the whole test on a 2-core machine.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from affect_memory.memory import erasure
from affect_memory.memory.chroma.writes import BatchWriter
from affect_memory.memory.index import memory_index
from affect_memory.memory.index.consistency import session
from affect_memory.memory.results import TurnWriteReport
from affect_memory.memory.store import ChromaMemory
from tests.plugin.memory.hashing_embedder import HashingEmbedder
from tests.plugin.memory.index.consistency.checks import assert_consistent

USERS = ("ann", "bob")
IDS = tuple(f"m{i}" for i in range(6))
"""The ids writes pick from: shared by both users (ids are per user)."""
WORDS = ("bees", "garden", "piano", "lisbon", "river", "coffee", "violin", "museum")
NOW = "2026-01-01T00:00:00Z"

WRITE_KILLS = ("announced", "written", "settling")
"""Where a write dies: journal committed (Chroma not written), Chroma written (not settled),
inside the settling transaction (before its commit)."""
TURN_KILLS = (*WRITE_KILLS, "counting")
"""A turn can also die inside its recall-count transaction."""
ERASE_KILLS = ("intent", "collection", "segments")
"""Where an erasure dies: after recording its intent, dropping the collection, or removing the
segment directories (each step whole)."""


class Killed(BaseException):
    """The simulated death of the writing process: no ``except Exception`` of the code under
    test catches it, and ``dying_at`` switches off the undo that catches ``BaseException``."""


@dataclass
class Held:
    """What the model says a user holds under one id."""

    text: str
    count: int
    turns: set[str] = field(default_factory=set)
    """Turns already counted in ``count`` (kept by an upsert, gone with the memory)."""


@dataclass(frozen=True)
class Turn:
    """One committed turn's writes, as the state store's outbox holds them."""

    turn_id: str
    user_id: str
    recalled_ids: tuple[str, ...]
    recalled_at: str
    new_record: dict[str, Any] | None


@contextmanager
def dying_at(point: str) -> Iterator[list[bool]]:
    """Kill the process (raise ``Killed``) the first time ``point`` is reached; yields a
    one-item list that says whether it was. Until the block ends, nothing runs that a dead
    process would not: no undo of a failed write, no reconciling of its journal entries."""
    fired = [False]

    def die() -> None:
        if not fired[0]:
            fired[0] = True
            raise Killed

    def after(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            outcome = original(*args, **kwargs)
            die()
            return outcome

        return wrapped

    def before(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            die()
            return original(*args, **kwargs)

        return wrapped

    targets: dict[str, list[tuple[Any, str, Callable[..., Any]]]] = {
        "announced": [(session.WriteSession, "_announce", after)],
        "written": [
            (session.WriteSession, "settle_writes", before),
            (session.WriteSession, "settle_forget", before),
        ],
        "settling": [(session, "settle", after)],
        "counting": [(memory_index, "record_recalls", after)],
        "intent": [(erasure, "record_intent", after)],
        "collection": [(erasure, "drop_collection", after)],
        "segments": [(erasure, "remove_segments", after)],
    }
    with ExitStack() as stack:
        for owner, name, wrap in targets[point]:
            stack.enter_context(mock.patch.object(owner, name, wrap(getattr(owner, name))))
        stack.enter_context(mock.patch.object(BatchWriter, "_undo", lambda self, plans: None))
        stack.enter_context(
            mock.patch.object(session.WriteSession, "_close_open", lambda self, error: None)
        )
        yield fired


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)
records = st.lists(
    st.tuples(st.sampled_from(IDS), st.integers(0, 3), words),
    min_size=1,
    max_size=4,
    unique_by=lambda item: item[0],
)
"""One user's batch: (id, recall count, words of the text)."""


class IndexAndChroma(RuleBasedStateMachine):
    """Writes, turns, erasures, kills and reopenings of one store, checked against a model."""

    turns = Bundle("turns")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="am-index-chroma-"))
        self.embedder = HashingEmbedder()
        self.memory = self._open()
        self.model: dict[str, dict[str, Held]] = {user: {} for user in USERS}
        self.serial = 0

    def _open(self) -> ChromaMemory:
        return ChromaMemory(
            self.root / "chroma",
            embedder=self.embedder,
            index=self.root / "index.sqlite3",
            progress=False,
        )

    def teardown(self) -> None:
        self.memory.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the model ---------------------------------------------------------------------------

    def _records(self, user: str, batch: Sequence[tuple[str, int, list[str]]]) -> list[Any]:
        """Records of ``batch``; every text is new (a serial), so no write repeats a row."""
        made = []
        for ident, count, words in batch:
            self.serial += 1
            made.append(
                {
                    "id": ident,
                    "user_id": user,
                    "text": f"{' '.join(words)} n{self.serial}",
                    "timestamp": f"2025-01-{1 + self.serial % 28:02d}T12:00:00Z",
                    "recall_count": count,
                }
            )
        return made

    def _model_add(self, batch: Sequence[dict[str, Any]]) -> tuple[str, ...]:
        skipped = []
        for record in batch:
            held = self.model[record["user_id"]]
            if record["id"] in held:
                skipped.append(record["id"])
            else:
                held[record["id"]] = Held(record["text"], record["recall_count"])
        return tuple(skipped)

    def _model_upsert(self, batch: Sequence[dict[str, Any]]) -> None:
        for record in batch:
            held = self.model[record["user_id"]]
            old = held.get(record["id"])
            turns = old.turns if old is not None else set()
            held[record["id"]] = Held(record["text"], record["recall_count"], turns)

    def _model_forget(self, user: str, ids: Sequence[str]) -> tuple[str, ...]:
        held = self.model[user]
        removed = tuple(ident for ident in ids if ident in held)
        for ident in removed:
            del held[ident]
        return removed

    def _model_recalls(self, turn: Turn) -> TurnWriteReport:
        held = self.model[turn.user_id]
        incremented, already, missing = [], [], []
        for ident in turn.recalled_ids:
            memory = held.get(ident)
            if memory is None:
                missing.append(ident)
            elif turn.turn_id in memory.turns:
                already.append(ident)
            else:
                memory.count += 1
                memory.turns.add(turn.turn_id)
                incremented.append(ident)
        return TurnWriteReport(tuple(incremented), tuple(already), tuple(missing), False, ())

    def _apply(self, turn: Turn) -> TurnWriteReport:
        return self.memory.apply_turn_writes(
            turn.turn_id,
            user_id=turn.user_id,
            recalled_ids=turn.recalled_ids,
            recalled_at=turn.recalled_at,
            new_record=turn.new_record,
        )

    def _model_turn(self, turn: Turn) -> TurnWriteReport:
        expected = self._model_recalls(turn)
        stored = False
        if turn.new_record is not None:
            stored = not self._model_add([turn.new_record])
        return TurnWriteReport(
            expected.incremented, expected.already_applied, expected.missing, stored, ()
        )

    def _new_turn(self, user: str, recalled: Sequence[str], says: bool) -> Turn:
        """A new turn of ``user``; with ``says``, its message becomes a memory of its own id."""
        self.serial += 1
        serial = self.serial
        message = None
        if says:
            (message,) = self._records(user, [(f"msg{serial}", 0, ["said", WORDS[serial % 8]])])
        stamp = f"2025-06-{1 + serial % 28:02d}T12:00:00Z"
        return Turn(f"turn{serial}", user, tuple(recalled), stamp, message)

    # -- rules -------------------------------------------------------------------------------

    @rule(user=st.sampled_from(USERS), batch=records, other=st.booleans())
    def add(self, user: str, batch: list[tuple[str, int, list[str]]], other: bool) -> None:
        """Add one user's records (with the other user's same ids too, when ``other``)."""
        made = self._records(user, batch)
        if other:
            made += self._records(USERS[1 - USERS.index(user)], batch)
        report = self.memory.add(made)
        skipped = self._model_add(made)
        assert report.skipped == skipped
        assert report.written == len(made) - len(skipped)

    @rule(user=st.sampled_from(USERS), batch=records)
    def upsert(self, user: str, batch: list[tuple[str, int, list[str]]]) -> None:
        """Upsert one user's records: new texts and counts for ids they may hold."""
        made = self._records(user, batch)
        self.memory.upsert(made)
        self._model_upsert(made)

    @rule(user=st.sampled_from(USERS), ids=st.lists(st.sampled_from(IDS), min_size=1, unique=True))
    def forget(self, user: str, ids: list[str]) -> None:
        """Forget some ids of one user (held or not)."""
        assert self.memory.forget(ids, user_id=user) == self._model_forget(user, ids)

    @rule(
        target=turns,
        user=st.sampled_from(USERS),
        recalled=st.lists(st.sampled_from(IDS), max_size=3, unique=True),
        says=st.booleans(),
    )
    def turn(self, user: str, recalled: list[str], says: bool) -> Turn:
        """Apply a committed turn's writes: recalls counted, the user's message stored."""
        turn = self._new_turn(user, recalled, says)
        assert self._apply(turn) == self._model_turn(turn)
        return turn

    @rule(turn=turns)
    def replay(self, turn: Turn) -> None:
        """Apply an earlier turn again, as the outbox does after a crash: it counts only for a
        memory that did not count it yet (one written, or written again, since)."""
        assert self._apply(turn) == self._model_turn(turn)

    @rule(user=st.sampled_from(USERS))
    def erase(self, user: str) -> None:
        """Erase one user; the other keeps every memory, same ids or not."""
        report = self.memory.erase_user(user)
        assert report.memories == len(self.model[user])
        self.model[user] = {}

    @rule()
    def reopen(self) -> None:
        """Close the store and open it again."""
        self.memory.close()
        self.memory = self._open()

    @rule(
        point=st.sampled_from(WRITE_KILLS),
        kind=st.sampled_from(("add", "upsert")),
        user=st.sampled_from(USERS),
        batch=records,
        reopen=st.booleans(),
    )
    def killed_write(
        self,
        point: str,
        kind: str,
        user: str,
        batch: list[tuple[str, int, list[str]]],
        reopen: bool,
    ) -> None:
        """A writer dies in the middle of an add or upsert; the next process opens the store
        (``reopen``), or one that lives on finds what it left."""
        made = self._records(user, batch)
        with dying_at(point) as fired, suppress(Killed):
            (self.memory.add if kind == "add" else self.memory.upsert)(made)
        event(f"{kind} killed at {point}" if fired[0] else f"{kind} not killed")
        # Dead before Chroma was written: nothing of it. After: all of it (one Chroma call).
        if not fired[0] or point != "announced":
            (self._model_add if kind == "add" else self._model_upsert)(made)
        if reopen:
            self.reopen()

    @rule(
        point=st.sampled_from(WRITE_KILLS),
        user=st.sampled_from(USERS),
        ids=st.lists(st.sampled_from(IDS), min_size=1, unique=True),
        reopen=st.booleans(),
    )
    def killed_forget(self, point: str, user: str, ids: list[str], reopen: bool) -> None:
        """A writer dies in the middle of a forget."""
        with dying_at(point) as fired, suppress(Killed):
            self.memory.forget(ids, user_id=user)
        event(f"forget killed at {point}" if fired[0] else "forget not killed")
        if not fired[0] or point != "announced":
            self._model_forget(user, ids)
        if reopen:
            self.reopen()

    @rule(
        target=turns,
        point=st.sampled_from(TURN_KILLS),
        user=st.sampled_from(USERS),
        recalled=st.lists(st.sampled_from(IDS), max_size=3, unique=True),
        says=st.booleans(),
        reopen=st.booleans(),
    )
    def killed_turn(
        self, point: str, user: str, recalled: list[str], says: bool, reopen: bool
    ) -> Turn:
        """A writer dies in the middle of a turn's writes; the turn stays owed (replay)."""
        turn = self._new_turn(user, recalled, says)
        with dying_at(point) as fired, suppress(Killed):
            self._apply(turn)
        event(f"turn killed at {point}" if fired[0] else "turn not killed")
        if not fired[0]:
            self._model_turn(turn)
        elif point != "counting":  # the counts were committed before the message's write
            self._model_recalls(turn)
            if point != "announced" and turn.new_record is not None:
                self._model_add([turn.new_record])
        if reopen:
            self.reopen()
        return turn

    @rule(point=st.sampled_from(ERASE_KILLS), user=st.sampled_from(USERS))
    def killed_erase(self, point: str, user: str) -> None:
        """An eraser dies after a step; opening the store finishes the erasure."""
        with dying_at(point), suppress(Killed):
            self.memory.erase_user(user)
        self.model[user] = {}
        self.reopen()

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def the_index_chroma_and_the_model_agree(self) -> None:
        """Index = Chroma (ids, texts, fields, totals, no journal left) = the model."""
        assert_consistent(self.memory, USERS)
        for user in USERS:
            held = self.model[user]
            assert self.memory.count(user) == len(held), user  # so Chroma holds no other id
            got = self.memory.get(sorted(held), user_id=user)
            assert {r.id: (r.text, r.recall_count) for r in got} == {
                ident: (memory.text, memory.count) for ident, memory in held.items()
            }, user

    @invariant()
    def recall_finds_only_the_users_own_memories(self) -> None:
        """Recall's hits are the user's memories, with their texts and counts."""
        for user in USERS:
            held = self.model[user]
            for word in WORDS[:2]:
                hits = self.memory.recall(word, user, now=NOW, top_k=len(IDS)).results
                assert {hit.id for hit in hits} <= set(held), user
                for hit in hits:
                    assert (hit.text, hit.recall_count) == (
                        held[hit.id].text,
                        held[hit.id].count,
                    ), (user, hit.id)


IndexAndChroma.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestIndexAndChroma = IndexAndChroma.TestCase
