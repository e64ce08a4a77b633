"""The journal beside the layout: commits and removals recorded in it, checkpoints and
replay (see journal.py for why, replay.py for how)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Sequence

from mailbus.outbox import replay
from mailbus.outbox.journal import Enqueued, Gone, Journal, Record
from mailbus.outbox.layout import JOURNAL
from mailbus.outbox.storage import Entry, State

log = logging.getLogger(__name__)
# Records between checkpoints. A checkpoint costs an fsync per directory of the layout
# (six) plus five per entry still queued that the records cover.
CHECKPOINT_RECORDS = 256
CHECKPOINT_BYTES = 4 * 1024 * 1024


class JournaledLayout:
    """The journal of the outbox at `root`, and the lock under which links are made and
    moved: a checkpoint must see no link move between its listing and its fsyncs
    (send() runs in the caller's thread, deliveries in the scheduler's)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.lock = threading.Lock()
        self.journal = Journal(f"{root}/{JOURNAL}")

    def commit(self, record: Enqueued, entries: Sequence[Entry]) -> None:
        """The commit point of an enqueue: its journal record, fsynced, then its queue
        links. If a link cannot be made, the record is taken back (and the links)."""
        with self.lock:
            before = self._append(record)
            links: list[str] = []
            try:
                for entry in entries:
                    link = f"{self.root}/{State.QUEUED.value}/{entry.id}"
                    os.symlink(f"../data/{entry.mail}/{entry.dest}", link)
                    links.append(link)
            except OSError:
                for link in links:
                    with contextlib.suppress(OSError):
                        os.unlink(link)
                with contextlib.suppress(OSError):
                    self.journal.withdraw(before)
                raise
            self._after_record()

    def _append(self, record: Record) -> int:
        """Append and fsync `record` (the journal's size before it); on a full disk,
        checkpoint first (an empty journal frees its space) and try once more."""
        try:
            return self.journal.append(record)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._checkpoint()
            return self.journal.append(record)

    def gone(self, ids: Sequence[str]) -> None:
        """Record, durably, that these entries left the queue for good (lock held, the
        link already moved). If the journal cannot take the record, a checkpoint makes
        the move durable instead (it fsyncs the directories and empties the journal,
        so no record is left to bring the entries back)."""
        try:
            self._append(Gone(tuple(ids)))
        except OSError:
            self._checkpoint()
            return
        self._after_record()

    def _after_record(self) -> None:
        """Checkpoint when the journal is long. The operation that wrote the record is
        done whatever happens here: a failed checkpoint is logged, and tried again."""
        journal = self.journal
        if journal.records >= CHECKPOINT_RECORDS or journal.size >= CHECKPOINT_BYTES:
            try:
                self._checkpoint()
            except OSError as exc:
                log.warning("outbox: checkpoint of the journal failed: %s", exc)

    def _checkpoint(self) -> None:
        records = self.journal.read()
        if self.journal.size == 0:
            return  # nothing recorded since the last checkpoint
        replay.checkpoint_fsyncs(self.root, records)
        self.journal.reset()

    def checkpoint(self) -> None:
        """Make the layout durable on its own and empty the journal (call under the
        outbox lock: at start-up after recovery, and at close). OSError on failure."""
        with self.lock:
            self._checkpoint()

    def replay(self) -> int:
        """Bring the layout in line with the journal (see replay.py): whatever a power
        cut or a repair took from it; the number of entries put back in the queue.
        Call first at start-up, under the outbox lock. OSError on failure."""
        with self.lock:
            records = self.journal.read()
            if not replay.needs_replay(records):
                return 0
            return replay.replay(self.root, records)
