"""Random sequences of primitives (and abandoned enqueues, and restarts) against a model:
after every step the directory tree is exactly what the design says for the model's
state, and every listing agrees with the model."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.scheduler import Scheduler
from mailbus.outbox.storage import Cleanup, Destination, Entry, Metadata, Schedule, State
from outbox_support import tree

STATES = ("data", "queue", "inflight", "cleanup", "dead", "corrupt")


@dataclass
class Model:
    entries: dict[str, Entry] = field(default_factory=dict)  # live: queue/inflight/dead
    cleanups: dict[str, Cleanup] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)

    def expected_tree(self) -> dict[str, str]:
        expected = {name: "dir 700" for name in STATES}
        expected["journal"] = "file 600"  # the write-ahead journal (outbox/journal.py)
        mails = {e.mail for e in self.entries.values()} | {c.mail for c in self.cleanups.values()}
        for mail in mails:
            expected[f"data/{mail}"] = "dir 700"
            expected[f"data/{mail}/contents"] = "file 600"
        for item in [*self.entries.values(), *self.cleanups.values()]:
            state = item.state.value if isinstance(item, Entry) else "cleanup"
            expected[f"{state}/{item.id}"] = f"link -> ../data/{item.mail}/{item.dest}"
            expected[f"data/{item.mail}/{item.dest}"] = "dir 700"
            expected[f"data/{item.mail}/{item.dest}/metadata"] = "file 600"
            expected[f"data/{item.mail}/{item.dest}/schedule"] = "file 600"
        return expected


def _pick(entries: dict[str, Entry], state: State, index: int) -> Entry:
    candidates = sorted((e for e in entries.values() if e.state is state), key=lambda e: e.id)
    return candidates[index % len(candidates)]


class OutboxMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="outbox-model-", dir=base)
        self.storage = FsStorage(self.dir)
        self.model = Model()
        self.counter = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def has(self, state: State) -> bool:
        return any(e.state is state for e in self.model.entries.values())

    @rule(n_dests=st.integers(1, 3), data=st.binary(max_size=64))
    def enqueue(self, n_dests: int, data: bytes) -> None:
        self.counter += 1
        enq = self.storage.enqueue()
        enq.write(data)
        meta = Metadata(f"<{self.counter}@m>", "s@x.org", ("r@y.org",), "s", len(data), 1)
        entries = enq.commit([Destination(meta, Schedule(0, self.counter, 0, ""))] * n_dests)
        for entry in entries:
            self.model.entries[entry.id] = entry
        self.model.contents[entries[0].mail] = data

    @rule()
    def abandon_an_enqueue(self) -> None:
        self.storage.enqueue().write(b"never committed")  # removed at the next restart

    @precondition(lambda self: self.has(State.QUEUED))
    @rule(i=st.integers(0, 100))
    def send_start(self, i: int) -> None:
        entry = self.storage.send_start(_pick(self.model.entries, State.QUEUED, i))
        assert self.storage.read_inflight(entry) == self.model.contents[entry.mail]
        self.model.entries[entry.id] = entry

    @precondition(lambda self: self.has(State.INFLIGHT))
    @rule(i=st.integers(0, 100), attempts=st.integers(1, 50))
    def fail_and_cancel(self, i: int, attempts: int) -> None:
        entry = _pick(self.model.entries, State.INFLIGHT, i)
        entry = self.storage.reschedule(entry, Schedule(attempts, 7, 6, "err"))
        self.model.entries[entry.id] = self.storage.send_cancel(entry)

    @precondition(lambda self: self.has(State.INFLIGHT))
    @rule(i=st.integers(0, 100), clean=st.booleans())
    def send_done(self, i: int, clean: bool) -> None:
        entry = self.model.entries.pop(_pick(self.model.entries, State.INFLIGHT, i).id)
        cleanup = self.storage.send_done(entry)
        if clean:
            self.storage.cleanup(cleanup)
        else:
            self.model.cleanups[cleanup.id] = cleanup  # as if the process died here

    @precondition(lambda self: self.has(State.INFLIGHT))
    @rule(i=st.integers(0, 100))
    def dead_letter(self, i: int) -> None:
        entry = self.storage.dead_letter(_pick(self.model.entries, State.INFLIGHT, i))
        self.model.entries[entry.id] = entry

    @precondition(lambda self: self.has(State.DEAD))
    @rule(i=st.integers(0, 100))
    def revive(self, i: int) -> None:
        entry = self.storage.revive(_pick(self.model.entries, State.DEAD, i))
        self.model.entries[entry.id] = entry

    @precondition(lambda self: bool(self.model.entries))
    @rule(i=st.integers(0, 100))
    def drop(self, i: int) -> None:
        ids = sorted(self.model.entries)
        entry = self.model.entries.pop(ids[i % len(ids)])
        self.storage.cleanup(self.storage.drop(entry))

    @rule()
    def restart(self) -> None:
        """A new process: the scheduler's start-up recovery."""
        self.storage = FsStorage(self.dir)
        report = Scheduler(self.storage, lambda e, d: None).recover()
        assert report.cleanups_finished == len(self.model.cleanups)
        assert report.set_aside == ()
        self.model.cleanups.clear()
        for entry_id, entry in list(self.model.entries.items()):
            if entry.state is State.INFLIGHT:
                self.model.entries[entry_id] = Entry(
                    entry.id, entry.mail, entry.dest, State.QUEUED, entry.metadata, entry.schedule
                )
        # Contents of mails whose every destination is gone are removed too.
        live = {e.mail for e in self.model.entries.values()}
        self.model.contents = {m: d for m, d in self.model.contents.items() if m in live}
        # Nothing else is left: abandoned enqueues and finished cleanups are gone.
        assert tree(self.storage.root) == self.model.expected_tree()

    @invariant()
    def tree_matches_the_design(self) -> None:
        if not hasattr(self, "storage"):
            return
        actual = tree(self.storage.root)
        expected = self.model.expected_tree()
        # Abandoned enqueues are the only extra: data/<mail>/contents and nothing else.
        extra = {k: v for k, v in actual.items() if k not in expected}
        abandoned = {k.split("/")[1] for k in extra}
        assert extra == {
            **{f"data/{m}": "dir 700" for m in abandoned},
            **{f"data/{m}/contents": "file 600" for m in abandoned},
        }
        assert {k: v for k, v in actual.items() if k in expected} == expected

    @invariant()
    def listings_match_the_model(self) -> None:
        if not hasattr(self, "storage"):
            return
        for state, listing in (
            (State.QUEUED, self.storage.list_queue()),
            (State.INFLIGHT, self.storage.find_inflight()),
            (State.DEAD, self.storage.list_dead()),
        ):
            assert listing.corrupt == ()
            expected = {e for e in self.model.entries.values() if e.state is state}
            assert set(listing.entries) == expected
        assert set(self.storage.find_pending_cleanup().entries) == set(self.model.cleanups.values())


OutboxMachine.TestCase.settings = settings(max_examples=20, stateful_step_count=25, deadline=None)
test_outbox_storage_against_the_model = OutboxMachine.TestCase
