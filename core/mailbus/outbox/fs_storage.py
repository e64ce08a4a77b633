"""The outbox on a local file system, with the layout of the queue design.

    <root>/data/<mail>/contents            the RFC 5322 bytes
    <root>/data/<mail>/<dest>/metadata     JSON (storage.Metadata)
    <root>/data/<mail>/<dest>/schedule     JSON (storage.Schedule)
    <root>/queue/<id>    -> ../data/<mail>/<dest>   waiting
    <root>/inflight/<id> -> ../data/<mail>/<dest>   being sent
    <root>/cleanup/<id>  -> ../data/<mail>/<dest>   sent or dropped, being removed
    <root>/dead/<id>     -> ../data/<mail>/<dest>   given up on, kept (ours)
    <root>/corrupt/<state>.<name>                   set aside, kept (ours)

Every name under data/ and every link name is a UUID made here; a link is only ever
followed after its target has been checked to be `../data/<uuid>/<uuid>`, so a foreign
link can never make the outbox read or delete outside its directory. Directories are
0700 and files 0600.

Durability (see docs/outbox.md): a write-ahead journal (`journal.py`) stands in for
the layout's fsyncs. An enqueue writes its files in place without fsync, appends one
record holding the contents, metadata and schedule to `<root>/journal` and fsyncs it
(the commit point), then makes the queue links. send_done and drop move the link to
cleanup and append a record saying the entry is gone, fsynced; cleanup then removes
files without fsync. A checkpoint (every CHECKPOINT_RECORDS records, at start-up and at
close) fsyncs what the records cover and empties the journal; at every start the
records are replayed onto the layout first (`replay.py`). send_start and send_cancel
are not made durable: losing either leaves the entry queued or in flight, and start-up
requeues in-flight entries anyway. The rarer moves (dead, revive, set aside) and a
reschedule's replacement file fsync their own directories, as the design describes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from mailbus.outbox import replay
from mailbus.outbox.files import (
    DIR_MODE,
    create_file,
    fsync_dir,
    fsync_dirs,
    make_dir,
    read_file,
    replace_file,
    storage_error,
    write_all,
)
from mailbus.outbox.journal import Enqueued, JournaledEntry
from mailbus.outbox.journaled import JournaledLayout
from mailbus.outbox.layout import CONTENTS as CONTENTS
from mailbus.outbox.layout import METADATA, SCHEDULE, STATE_DIRS
from mailbus.outbox.layout import TARGET_RE as TARGET_RE
from mailbus.outbox.layout import UUID_RE as UUID_RE
from mailbus.outbox.layout import new_id as new_id
from mailbus.outbox.storage import (
    Cleanup,
    CleanupListing,
    Corrupt,
    CorruptEntryError,
    Destination,
    Enqueuer,
    Entry,
    Listing,
    Metadata,
    Schedule,
    State,
    Storage,
    VanishedError,
)


class FsEnqueuer(Enqueuer):
    def __init__(self, storage: FsStorage) -> None:
        self._storage = storage
        self.mail = new_id()
        # Plain strings on the hot path: pathlib costs more than the syscalls here.
        self._mail_dir = f"{storage.data_s}/{self.mail}"
        self._fd: int | None = None
        self._done = False
        try:
            make_dir(self._mail_dir)
            self._fd = create_file(f"{self._mail_dir}/{CONTENTS}")
        except OSError as exc:
            self.abort()
            raise storage_error(exc, "start an enqueue") from exc

    def write(self, data: bytes) -> None:
        if self._fd is None or self._done:
            raise RuntimeError("enqueue already committed or aborted")
        try:
            write_all(self._fd, data)
        except OSError as exc:
            self.abort()
            raise storage_error(exc, "write contents") from exc

    def commit(self, destinations: Sequence[Destination]) -> list[Entry]:
        if self._fd is None or self._done:
            raise RuntimeError("enqueue already committed or aborted")
        if not destinations:
            raise ValueError("a mail needs at least one destination")
        storage = self._storage
        fd, self._fd = self._fd, None
        entries: list[Entry] = []
        journaled: list[JournaledEntry] = []
        try:
            os.close(fd)
            # The layout in place, not fsynced: the journal record stands in for it.
            for destination in destinations:
                dest = new_id()
                dest_dir = f"{self._mail_dir}/{dest}"
                make_dir(dest_dir)
                metadata = destination.metadata.to_json()
                schedule = destination.schedule.to_json()
                for name, data in ((METADATA, metadata), (SCHEDULE, schedule)):
                    file_fd = create_file(f"{dest_dir}/{name}")
                    try:
                        write_all(file_fd, data)
                    finally:
                        os.close(file_fd)
                entry = Entry(
                    new_id(),
                    self.mail,
                    dest,
                    State.QUEUED,
                    destination.metadata,
                    destination.schedule,
                )
                entries.append(entry)
                journaled.append(JournaledEntry(entry.id, dest, metadata, schedule))
            contents = read_file(f"{self._mail_dir}/{CONTENTS}")
            storage.wal.commit(Enqueued(self.mail, tuple(journaled), contents), entries)
        except OSError as exc:
            self.abort()
            raise storage_error(exc, f"commit mail {self.mail}") from exc
        self._done = True
        return entries

    def abort(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if not self._done:
            self._done = True
            shutil.rmtree(self._mail_dir, ignore_errors=True)


class FsStorage(Storage):
    """The queue design on a local directory. Not safe for two processes at once: the
    scheduler holds `lock_path` (see lock.OutboxLock) while it uses the outbox."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        self.root = Path(root)
        self.data = self.root / "data"
        self.lock_path = self.root / "lock"
        self.root_s = str(self.root)
        self.data_s = str(self.data)
        try:
            if create:
                made = False
                if not self.root.exists():
                    self.root.mkdir(parents=True, mode=DIR_MODE)
                    os.chmod(self.root, DIR_MODE)
                    made = True
                for name in ("data", *STATE_DIRS):
                    path = self.root / name
                    if not path.is_dir():
                        make_dir(path)
                        made = True
                if made:
                    fsync_dirs(self.root, self.root.parent)
            missing = [n for n in ("data", *STATE_DIRS) if not (self.root / n).is_dir()]
        except OSError as exc:
            raise storage_error(exc, f"open outbox directory {self.root}") from exc
        if missing:
            listed = ", ".join(f"{name}/" for name in missing)
            raise VanishedError(f"{self.root} is not an outbox (missing {listed})")
        self.wal = JournaledLayout(self.root_s)
        if create and not os.path.exists(self.wal.journal.path):
            try:
                os.close(os.open(self.wal.journal.path, os.O_WRONLY | os.O_CREAT, 0o600))
                fsync_dir(self.root)
            except OSError as exc:
                raise storage_error(exc, f"create {self.wal.journal.path}") from exc

    def checkpoint(self) -> None:
        try:
            self.wal.checkpoint()
        except OSError as exc:
            raise storage_error(exc, "checkpoint the journal") from exc

    def replay_journal(self) -> int:
        try:
            return self.wal.replay()
        except OSError as exc:
            raise storage_error(exc, "replay the journal") from exc

    def close(self) -> None:
        self.wal.journal.close()

    # -- reading entries ----------------------------------------------------------------
    def _target(self, state: State, name: str) -> tuple[str, str]:
        """(mail, dest) of link `state/name`, checked; CorruptEntryError otherwise."""
        path = self.root / state / name
        if not UUID_RE.fullmatch(name):
            raise CorruptEntryError(state, name, "foreign file (name is not an outbox id)")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise VanishedError(f"{state.value}/{name} is gone") from None
        if not stat.S_ISLNK(st.st_mode):
            raise CorruptEntryError(state, name, "foreign file (not a symlink)")
        try:
            target = os.readlink(path)
        except FileNotFoundError:
            raise VanishedError(f"{state.value}/{name} is gone") from None
        match = TARGET_RE.fullmatch(target)
        if match is None:
            raise CorruptEntryError(state, name, f"link points outside data/: {target!r}")
        return match.group(1), match.group(2)

    def _read_entry(self, state: State, name: str) -> Entry:
        mail, dest = self._target(state, name)
        dest_dir = self.data / mail / dest
        if not dest_dir.is_dir():
            raise CorruptEntryError(state, name, f"broken symlink (no data/{mail}/{dest})")
        parsed: list[object] = []
        for file_name, parse in ((METADATA, Metadata.from_json), (SCHEDULE, Schedule.from_json)):
            try:
                parsed.append(parse(read_file(dest_dir / file_name)))
            except FileNotFoundError:
                raise CorruptEntryError(state, name, f"missing {file_name}") from None
            except ValueError as exc:
                raise CorruptEntryError(state, name, f"unreadable {file_name}: {exc}") from None
        if not (self.data / mail / CONTENTS).is_file():
            raise CorruptEntryError(state, name, "missing contents")
        metadata, schedule = parsed
        assert isinstance(metadata, Metadata) and isinstance(schedule, Schedule)
        return Entry(name, mail, dest, state, metadata, schedule)

    def _names(self, state: State) -> Iterator[str]:
        try:
            names = sorted(os.listdir(self.root / state))
        except OSError as exc:
            raise storage_error(exc, f"list {state.value}/") from exc
        yield from names

    def list_state(self, state: State) -> Listing:
        """Entries of a queue, inflight or dead directory."""
        entries: list[Entry] = []
        corrupt: list[Corrupt] = []
        for name in self._names(state):
            try:
                entries.append(self._read_entry(state, name))
            except CorruptEntryError as exc:
                corrupt.append(Corrupt(state, name, exc.reason))
            except VanishedError:
                continue
            except OSError as exc:
                raise storage_error(exc, f"read {state.value}/{name}") from exc
        return Listing(tuple(entries), tuple(corrupt))

    def read(self, state: State, name: str) -> Entry:
        """One entry by state and id (for the command line and tests)."""
        try:
            return self._read_entry(state, name)
        except OSError as exc:
            raise storage_error(exc, f"read {state.value}/{name}") from exc

    def list_queue(self) -> Listing:
        return self.list_state(State.QUEUED)

    def find_inflight(self) -> Listing:
        return self.list_state(State.INFLIGHT)

    def list_dead(self) -> Listing:
        return self.list_state(State.DEAD)

    def find_pending_cleanup(self) -> CleanupListing:
        # A cleanup link may dangle: the crash came after the data went.
        entries: list[Cleanup] = []
        corrupt: list[Corrupt] = []
        for name in self._names(State.CLEANUP):
            try:
                mail, dest = self._target(State.CLEANUP, name)
            except CorruptEntryError as exc:
                corrupt.append(Corrupt(State.CLEANUP, name, exc.reason))
                continue
            except VanishedError:
                continue
            entries.append(Cleanup(name, mail, dest))
        return CleanupListing(tuple(entries), tuple(corrupt))

    def list_corrupt(self) -> list[str]:
        return list(self._names(State.CORRUPT))

    # -- queuing and reading ------------------------------------------------------------
    def enqueue(self) -> FsEnqueuer:
        return FsEnqueuer(self)

    def read_inflight(self, entry: Entry) -> bytes:
        self._expect(entry, State.INFLIGHT)
        try:
            return read_file(f"{self.data_s}/{entry.mail}/{CONTENTS}")
        except FileNotFoundError:
            raise CorruptEntryError(State.INFLIGHT, entry.id, "missing contents") from None
        except OSError as exc:
            raise storage_error(exc, f"read contents of {entry.mail}") from exc

    # -- state changes ------------------------------------------------------------------
    def _expect(self, entry: Entry | Cleanup, state: State) -> None:
        if isinstance(entry, Entry) and entry.state is not state:
            raise ValueError(f"entry {entry.id} is {entry.state.value}, expected {state.value}")

    def _move(
        self, entry_id: str, source: State, target: State, *, durable: bool, gone: bool = False
    ) -> None:
        """Rename the link; `durable`: fsync both directories; `gone`: record in the
        journal that the entry left the queue for good (one fsync)."""
        try:
            root = self.root_s
            with self.wal.lock:
                moved = f"{root}/{target.value}/{entry_id}"
                os.rename(f"{root}/{source.value}/{entry_id}", moved)
                if gone:
                    try:
                        self.wal.gone([entry_id])
                    except OSError:
                        os.rename(moved, f"{root}/{source.value}/{entry_id}")  # not done
                        raise
            if durable:
                fsync_dirs(f"{root}/{target.value}", f"{root}/{source.value}")
        except FileNotFoundError as exc:
            if not (self.root / source / entry_id).exists():
                raise VanishedError(f"{source.value}/{entry_id} is gone") from None
            raise storage_error(exc, f"move {entry_id} to {target.value}/") from exc
        except OSError as exc:
            raise storage_error(exc, f"move {entry_id} to {target.value}/") from exc

    def _moved(self, entry: Entry, target: State, *, durable: bool) -> Entry:
        self._move(entry.id, entry.state, target, durable=durable)
        return Entry(entry.id, entry.mail, entry.dest, target, entry.metadata, entry.schedule)

    def reschedule(self, entry: Entry, schedule: Schedule) -> Entry:
        if entry.state not in (State.QUEUED, State.INFLIGHT, State.DEAD):
            raise ValueError(f"cannot reschedule a {entry.state.value} entry")
        if not os.path.lexists(self.root / entry.state / entry.id):
            raise VanishedError(f"{entry.state.value}/{entry.id} is gone")
        dest_dir = self.data / entry.mail / entry.dest
        try:
            replace_file(dest_dir, f"{SCHEDULE}.{new_id()}.tmp", SCHEDULE, schedule.to_json())
        except OSError as exc:
            raise storage_error(exc, f"reschedule {entry.id}") from exc
        return Entry(entry.id, entry.mail, entry.dest, entry.state, entry.metadata, schedule)

    def send_start(self, entry: Entry) -> Entry:
        self._expect(entry, State.QUEUED)
        return self._moved(entry, State.INFLIGHT, durable=False)

    def send_cancel(self, entry: Entry) -> Entry:
        self._expect(entry, State.INFLIGHT)
        return self._moved(entry, State.QUEUED, durable=False)

    def send_done(self, entry: Entry) -> Cleanup:
        self._expect(entry, State.INFLIGHT)
        self._move(entry.id, State.INFLIGHT, State.CLEANUP, durable=False, gone=True)
        return Cleanup(entry.id, entry.mail, entry.dest)

    def drop(self, entry: Entry) -> Cleanup:
        if entry.state not in (State.QUEUED, State.INFLIGHT, State.DEAD):
            raise ValueError(f"cannot drop a {entry.state.value} entry")
        self._move(entry.id, entry.state, State.CLEANUP, durable=False, gone=True)
        return Cleanup(entry.id, entry.mail, entry.dest)

    def dead_letter(self, entry: Entry) -> Entry:
        self._expect(entry, State.INFLIGHT)
        return self._moved(entry, State.DEAD, durable=True)

    def revive(self, entry: Entry) -> Entry:
        self._expect(entry, State.DEAD)
        return self._moved(entry, State.QUEUED, durable=True)

    def cleanup(self, entry: Cleanup) -> None:
        # Each step tolerates that a crashed earlier cleanup already did it.
        mail_dir = f"{self.data_s}/{entry.mail}"
        dest_dir = f"{mail_dir}/{entry.dest}"
        try:
            with contextlib.suppress(FileNotFoundError):
                for name in os.listdir(dest_dir):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{dest_dir}/{name}")
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(dest_dir)
            with contextlib.suppress(FileNotFoundError):
                if set(os.listdir(mail_dir)) <= {CONTENTS}:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{mail_dir}/{CONTENTS}")
                    os.rmdir(mail_dir)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.root_s}/{State.CLEANUP.value}/{entry.id}")
        except OSError as exc:
            raise storage_error(exc, f"clean up {entry.id}") from exc

    def set_aside(self, corrupt: Corrupt) -> None:
        if corrupt.state is State.CORRUPT:
            return
        source = self.root / corrupt.state / corrupt.name
        target = self.root / State.CORRUPT / f"{corrupt.state.value}.{corrupt.name}"
        try:
            if os.path.lexists(target):
                target = target.with_name(f"{target.name}.{new_id()}")
            with self.wal.lock:
                os.rename(source, target)
                if UUID_RE.fullmatch(corrupt.name):
                    self.wal.gone([corrupt.name])  # a replay must not queue it again
            fsync_dirs(self.root / State.CORRUPT, source.parent)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise storage_error(exc, f"set aside {corrupt.state.value}/{corrupt.name}") from exc

    def remove_uncommitted(self) -> list[str]:
        try:
            return replay.remove_unreferenced(self.root)
        except OSError as exc:
            raise storage_error(exc, "remove uncommitted enqueues") from exc
