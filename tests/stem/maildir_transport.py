"""A minimal cross-process transport for the Stem tests: a directory per participant,
Maildir style. Sending writes the email's RFC 5322 bytes (`mailbus.to_bytes`) into
`tmp/` of every participant's directory and renames it into `new/` (atomic: a reader
never sees half a file); receiving reads `new/` in name order and deletes what it read.
Like a mailing list, every participant gets every email; Mailbus picks by Subject.

It stands in for the email and PostOffice transports, which are built in parallel; it
exercises the same path as they do: bytes, parsed by the engine in another process.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

from mailbus import Email, EmailReceiver, EmailSender, RawEmail, Transport, to_bytes
from mailbus.transport import Inbound

POLL_S = 0.002  # how often an idle receiver looks at its directory


def _box(root: Path, name: str) -> Path:
    box = root / name
    for sub in ("tmp", "new"):
        (box / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    return box


class DirSender(EmailSender):
    def __init__(self, root: Path) -> None:
        self._root = root
        self._sequence = itertools.count()
        self._pid = os.getpid()

    def deliver(self, email: Email) -> None:
        data = to_bytes(email)
        # Time first, then this sender's counter: names sort in sending order.
        name = f"{time.time_ns():020d}.{self._pid}.{next(self._sequence):09d}.eml"
        for box in sorted(p for p in self._root.iterdir() if (p / "new").is_dir()):
            tmp = box / "tmp" / name
            tmp.write_bytes(data)
            os.replace(tmp, box / "new" / name)


class DirReceiver(EmailReceiver):
    def __init__(self, root: Path, name: str) -> None:
        self._new = _box(root, name) / "new"
        self._woken = threading.Event()

    def receive(self, timeout: float | None) -> list[Inbound]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            names = sorted(os.listdir(self._new))
            if names:
                items: list[Inbound] = []
                for name in names:
                    path = self._new / name
                    items.append(RawEmail(path.read_bytes(), origin=name))
                    path.unlink()
                return items
            if self._woken.is_set():
                self._woken.clear()
                return []
            if deadline is not None and time.monotonic() >= deadline:
                return []
            wait = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if self._woken.wait(max(wait, 0.0)):
                self._woken.clear()
                return []

    def wake(self) -> None:
        self._woken.set()


def maildir_transport(root: Path, name: str) -> Transport:
    """The transport of participant `name` under `root` (created if missing)."""
    receiver = DirReceiver(Path(root), name)  # makes the box first: it gets what follows
    return Transport(DirSender(Path(root)), receiver, name="maildir-test")
