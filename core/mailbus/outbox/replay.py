"""Start-up work on the layout: replaying the journal (see journal.py) after a power
cut, checkpointing (fsync what its records cover, so that it can be emptied), and
removing data no link refers to.

All run under the outbox lock and FsStorage's own lock, so no link moves meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mailbus.outbox.files import fsync_dir, fsync_together, open_dir, read_file, write_all
from mailbus.outbox.journal import Enqueued, JournaledEntry, Record
from mailbus.outbox.layout import (
    CONTENTS,
    METADATA,
    SCHEDULE,
    STATE_DIRS,
    TARGET_RE,
    TMP_RE,
    UUID_RE,
    new_id,
)
from mailbus.outbox.storage import Schedule, State

_LINK_STATES = (State.QUEUED, State.INFLIGHT, State.CLEANUP, State.DEAD)


@dataclass
class Covered:
    """What the records say: entries enqueued and not gone, with their mail's record."""

    live: dict[str, tuple[Enqueued, JournaledEntry]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)


def covered(records: list[Record]) -> Covered:
    result = Covered()
    for record in records:
        if isinstance(record, Enqueued):
            for entry in record.entries:
                result.live[entry.id] = (record, entry)
        else:
            result.gone.update(record.ids)
    for entry_id in result.gone:
        result.live.pop(entry_id, None)
    return result


def needs_replay(records: list[Record]) -> bool:
    """True when there are records: the layout they cover may have lost writes, and
    not only to a power cut (a new boot id). A file system that turned read-only
    before its page cache was written back, then was repaired by fsck within the same
    boot, leaves files empty or missing that the journal still holds. Replay is
    idempotent and rewrites only what differs, so it runs whatever the boot."""
    return bool(records)


def _links(root: str) -> dict[str, State]:
    found: dict[str, State] = {}
    for state in _LINK_STATES:
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(f"{root}/{state.value}"):
                found[name] = state
    return found


def _restore(directory: str, name: str, data: bytes) -> None:
    """`directory/name` holds `data`, written under a temporary name and renamed (a kill
    meanwhile leaves a temporary file that start-up removes)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = f"{directory}/{name}.{new_id()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.rename(tmp, f"{directory}/{name}")


def _holds(path: str, data: bytes) -> bool:
    try:
        return read_file(path) == data
    except OSError:
        return False


def _schedule_readable(path: str) -> bool:
    try:
        Schedule.from_json(read_file(path))
    except (OSError, ValueError):
        return False
    return True


def replay(root: str, records: list[Record]) -> int:
    """Bring the layout in line with `records` (after a power cut, or a repair that
    emptied files the journal still holds); how many entries had
    to be put back. Entries gone stay gone (moved to cleanup if a link came back);
    entries enqueued get their files back where missing or damaged, and their queue link
    when no state holds one. A schedule that reads is kept: a reschedule fsyncs its own
    replacement. Idempotent, so a kill during replay is harmless."""
    state = covered(records)
    links = _links(root)
    for entry_id in state.gone:
        where = links.get(entry_id)
        if where in (State.QUEUED, State.INFLIGHT, State.DEAD):
            assert where is not None
            os.rename(f"{root}/{where.value}/{entry_id}", f"{root}/cleanup/{entry_id}")
    restored = 0
    for entry_id, (record, entry) in state.live.items():
        where = links.get(entry_id)
        if where is State.CLEANUP:
            continue  # on its way out already
        mail_dir = f"{root}/data/{record.mail}"
        dest_dir = f"{mail_dir}/{entry.dest}"
        if not _holds(f"{mail_dir}/{CONTENTS}", record.contents):
            _restore(mail_dir, CONTENTS, record.contents)
        if not _holds(f"{dest_dir}/{METADATA}", entry.metadata):
            _restore(dest_dir, METADATA, entry.metadata)
        if not _schedule_readable(f"{dest_dir}/{SCHEDULE}"):
            _restore(dest_dir, SCHEDULE, entry.schedule)
        if where is None:
            os.symlink(f"../data/{record.mail}/{entry.dest}", f"{root}/queue/{entry_id}")
            restored += 1
    return restored


def checkpoint_fsyncs(root: str, records: list[Record]) -> None:
    """fsync everything the records stand in for: the files and directories of every
    entry they enqueued that still has a link, and the directories whose names changed
    (links made, moved and removed; data directories made and removed). Afterwards the
    layout alone survives a power cut, and the journal may be emptied."""
    if not records:
        return
    state = covered(records)
    links = _links(root)
    paths: list[tuple[str, bool]] = []  # (path, is a directory)
    mails: set[str] = set()
    for entry_id, (record, entry) in state.live.items():
        if links.get(entry_id) in (None, State.CLEANUP):
            continue
        dest_dir = f"{root}/data/{record.mail}/{entry.dest}"
        paths += [(f"{dest_dir}/{METADATA}", False), (f"{dest_dir}/{SCHEDULE}", False)]
        paths.append((dest_dir, True))
        if record.mail not in mails:
            mails.add(record.mail)
            paths += [(f"{root}/data/{record.mail}/{CONTENTS}", False)]
            paths.append((f"{root}/data/{record.mail}", True))
    paths += [(f"{root}/data", True)]
    paths += [(f"{root}/{s.value}", True) for s in _LINK_STATES]
    fds: list[int] = []
    try:
        for path, is_dir in paths:
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile: nothing to keep
                fds.append(open_dir(path) if is_dir else os.open(path, os.O_RDONLY))
        fsync_together(fds)
    finally:
        for fd in fds:
            os.close(fd)


def _referenced(root: Path) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for state in STATE_DIRS:
        for name in sorted(os.listdir(root / state)):
            try:
                target = os.readlink(root / state / name)
            except OSError:
                continue
            match = TARGET_RE.fullmatch(target)
            if match is not None:
                found.add((match.group(1), match.group(2)))
    return found


def remove_unreferenced(root: Path) -> list[str]:
    """Remove data no link refers to (see Storage.remove_uncommitted); the mail ids
    removed. Foreign things in data/ are moved to corrupt/, never deleted."""
    removed: list[str] = []
    data = root / "data"
    referenced = _referenced(root)
    for mail in sorted(os.listdir(data)):
        mail_dir = data / mail
        if not UUID_RE.fullmatch(mail) or not mail_dir.is_dir() or mail_dir.is_symlink():
            # Not ours: keep it for inspection, out of data/.
            os.rename(mail_dir, root / State.CORRUPT / f"data.{mail}.{new_id()}")
            continue
        kept = 0
        for name in os.listdir(mail_dir):
            path = mail_dir / name
            if name == CONTENTS:
                continue
            if UUID_RE.fullmatch(name) and (mail, name) in referenced:
                kept += 1
                for leftover in os.listdir(path):
                    if TMP_RE.fullmatch(leftover):
                        os.unlink(path / leftover)
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                os.unlink(path)
        if kept == 0:
            shutil.rmtree(mail_dir)
            removed.append(mail)
    fsync_dir(data)
    return removed
