"""Replay protection: a signed email is taken once, and only while it is fresh.

A captured signed email stays valid for ever as far as DKIM is concerned; re-sending it
would repeat its message or request. So, when signatures are required, an email whose
timestamp is further than `max_age_s` from now, or whose Message-ID was seen already, is
refused. Only Message-IDs within the window need remembering (older ones fail the age
test), so the set is bounded by time and by `capacity`. When `capacity` Message-IDs
within the window are remembered, a new email is refused ("replay window full") rather
than one of them forgotten: forgetting would let that email be replayed. The sustained
rate the guard takes is capacity / max_age_s emails per second.

With a state directory the set is also kept on disk (`seen-message-ids.log`, one
"<timestamp_ns> <Message-ID>" line per email, appended and flushed as it is taken), so a
restarted subscriber still refuses what it took before. The directory is locked: two
processes sharing it would each miss the other's entries.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import IO

from mailbus.errors import ConfigError

LOG_NAME = "seen-message-ids.log"
WINDOW_FULL = "replay window full"
LOCK_NAME = "seen.lock"
_LINE = re.compile(r"([0-9]{1,19}) (<[^<>\s]{1,996}>)")


class ReplayGuard:
    def __init__(
        self, max_age_s: float, capacity: int, state_dir: str | os.PathLike[str] | None = None
    ) -> None:
        self.max_age_ns = int(max_age_s * 1e9)
        self.capacity = capacity
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._log: IO[str] | None = None
        self._lock_file: IO[bytes] | None = None
        self._appended = 0
        self.skipped_lines = 0  # lines of the state file that were not ours
        self._dir = Path(state_dir) if state_dir else None
        if self._dir is not None:
            self._open(self._dir)

    # -- state on disk ---------------------------------------------------------------------
    def _open(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock_file = open(directory / LOCK_NAME, "ab")  # noqa: SIM115 - held open
        except OSError as exc:
            raise ConfigError("signing.state-dir", f"cannot use {directory}: {exc}") from None
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            self._lock_file = None
            raise ConfigError(
                "signing.state-dir", f"{directory} is in use by another process; give each its own"
            ) from None
        now = time.time_ns()
        try:
            with open(directory / LOG_NAME, encoding="ascii", errors="replace") as old:
                for line in old:
                    match = _LINE.fullmatch(line.rstrip("\n"))
                    if match is None:
                        self.skipped_lines += 1  # a torn last line after a crash, say
                        continue
                    sent_ns = int(match.group(1))
                    if abs(now - sent_ns) <= self.max_age_ns:
                        self._remember(match.group(2), sent_ns)
        except FileNotFoundError:
            pass
        self._compact()

    def _compact(self) -> None:
        """Rewrite the log with what is remembered now, atomically, and reopen it."""
        assert self._dir is not None
        if self._log is not None:
            self._log.close()
        temporary = self._dir / (LOG_NAME + ".tmp")
        with open(temporary, "w", encoding="ascii") as out:
            out.writelines(f"{sent} {mid}\n" for mid, sent in self._seen.items())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self._dir / LOG_NAME)
        self._log = open(self._dir / LOG_NAME, "a", encoding="ascii")  # noqa: SIM115
        self._appended = 0

    # -- the check -------------------------------------------------------------------------
    def _remember(self, message_id: str, sent_ns: int) -> None:
        self._seen[message_id] = sent_ns
        self._seen.move_to_end(message_id)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)

    def check(self, message_id: str, sent_ns: int, now_ns: int | None = None) -> str | None:
        """None when the email is fresh and new (it is then remembered); else why not."""
        now = time.time_ns() if now_ns is None else now_ns
        age = now - sent_ns
        if age > self.max_age_ns:
            return f"replayed: sent {age / 1e9:.0f} s ago, older than max-age-s"
        if -age > self.max_age_ns:
            return f"replayed: dated {-age / 1e9:.0f} s in the future, beyond max-age-s"
        if not message_id:
            return "replayed: no Message-ID to check it against"
        if not (message_id.isascii() and _LINE.fullmatch(f"0 {message_id}")):
            return "replayed: the Message-ID cannot be checked (not plain ASCII <...>)"
        with self._lock:
            if message_id in self._seen:
                return f"replayed: Message-ID {message_id} was taken already"
            # Arrival order is close to send order: expired entries gather at the front.
            seen = self._seen
            while seen:
                oldest_id, oldest_ns = next(iter(seen.items()))
                if now - oldest_ns <= self.max_age_ns:
                    break
                del seen[oldest_id]
            if len(seen) >= self.capacity:
                return (
                    f"{WINDOW_FULL}: {self.capacity} Message-IDs taken within max-age-s "
                    f"({self.max_age_ns / 1e9:.0f} s); raise seen-capacity or lower max-age-s"
                )
            self._remember(message_id, sent_ns)
            if self._log is not None:
                self._log.write(f"{sent_ns} {message_id}\n")
                self._log.flush()
                self._appended += 1
                if self._appended > 2 * max(self.capacity, 1000):
                    self._compact()
        return None

    def __len__(self) -> int:
        return len(self._seen)

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._lock_file is not None:
                self._lock_file.close()  # releases the lock
                self._lock_file = None
