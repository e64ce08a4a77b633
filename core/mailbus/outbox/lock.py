"""The outbox directory's lock: one process sends from an outbox at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from pathlib import Path

from mailbus.outbox.files import storage_error
from mailbus.outbox.storage import OutboxLockedError


class OutboxLock:
    """An exclusive flock on `<root>/lock`, so that one process at a time uses an outbox
    directory. The kernel releases it when the holder dies, however it dies."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def record(self) -> tuple[str, str] | None:
        """(pid, note) as the current holder wrote them in the lock file, None while it
        is empty (free, or taken a moment ago and not written yet)."""
        try:
            words = self.path.read_text(encoding="ascii").split()
        except (OSError, UnicodeDecodeError):
            return ("?", "")
        if not words:
            return None
        return words[0], " ".join(words[1:])

    def holder(self) -> str:
        """The pid recorded by the current holder, for error messages."""
        record = self.record()
        return "?" if record is None else record[0]

    def set_note(self, note: str) -> None:
        """Record `note` after our pid (what the holder offers, e.g. to answer control
        requests); only while held."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                data = f"{os.getpid()} {note}".strip() + "\n"
                os.pwrite(self._fd, data.encode("ascii"), 0)
                os.ftruncate(self._fd, len(data))

    def acquire(self, timeout: float = 0.0) -> None:
        """Take the lock, polling up to `timeout` seconds; OutboxLockedError if another
        process keeps it."""
        if self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise storage_error(exc, f"take the lock of outbox {self.path.parent}") from None
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise OutboxLockedError(
                            f"outbox {self.path.parent} is in use by process {self.holder()}"
                        ) from None
                    pause.wait(0.02)  # flock has no timeout: poll with a deadline
            # The pid is only for messages: a full disk must not stop start-up.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None
