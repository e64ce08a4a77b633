"""When the IMAP receiver polls and when it waits in IDLE (sans-IO: it is told the
time and what the polls found, and answers).

Modes (`[mail] idle`):
- "auto" (default), adaptive: poll every `period_s` while mail flows; after
  FULL_SPEED_POLLS empty polls, each empty poll doubles the gap, up to `max_period_s`;
  after `quiet_s` without new mail, wait in IMAP IDLE (when the server offers it) until
  the server announces mail, then poll fast again. An idle inbox then costs a
  participant nothing but the open connection.
- "always": IDLE between every two polls (polls every `period_s` at most).
- "never": poll every `period_s` whatever the traffic (the receiver's first strategy).

An IDLE lasts at most `recheck_s`: then one poll, and IDLE again. That bounds the
first-message latency when the server's announcement goes missing (mail landing between
the last poll and the IDLE command, or a server that does not push) and keeps the
IDLE under the 29 minutes of RFC 2177.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mailbus.errors import ConfigError

MODES = ("auto", "always", "never")
# Empty polls at the full period after mail before the gap grows: a reply or the next
# message of a sequence comes within a few periods and is seen at full speed.
FULL_SPEED_POLLS = 3


@dataclass(slots=True)
class ReceiveSchedule:
    mode: str = "auto"
    period_s: float = 0.01
    max_period_s: float = 0.08
    quiet_s: float = 2.0
    recheck_s: float = 30.0
    # Set on connect: whether the server offers IDLE (without it "auto" polls at
    # `max_period_s` once quiet, and "always" at `period_s`).
    can_idle: bool = False
    _last_mail: float = field(default=-math.inf, repr=False)
    _empty_polls: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError("mail.idle", f"expected auto, always or never, got {self.mode!r}")
        if not 0 < self.period_s <= self.max_period_s:
            raise ConfigError("mail.max-period-ms", "must be at least the polling period")
        if self.quiet_s < 0:
            raise ConfigError("mail.quiet-ms", "must be >= 0")
        if self.recheck_s <= 0:
            raise ConfigError("mail.idle-recheck-s", "must be > 0")

    def connected(self, now: float, can_idle: bool) -> None:
        """A (re)connection: poll fast for a while, as if mail had just come."""
        self.can_idle = can_idle
        self._last_mail = now
        self._empty_polls = 0

    def polled(self, now: float, found: int) -> float:
        """A poll found `found` new emails; the seconds until the next poll."""
        if found:
            self._last_mail = now
            self._empty_polls = 0
            return self.period_s
        if self.mode == "never":
            return self.period_s
        self._empty_polls += 1
        if self.mode == "always":
            return self.period_s
        grown = max(0, min(self._empty_polls - FULL_SPEED_POLLS, 30))
        return min(self.period_s * 2.0**grown, self.max_period_s)

    def idles(self, now: float) -> bool:
        """Whether the wait before the next poll is an IMAP IDLE."""
        if not self.can_idle or self.mode == "never":
            return False
        return self.mode == "always" or now - self._last_mail >= self.quiet_s

    def idle_from(self) -> float:
        """When (monotonic) the waits become IDLEs if no mail comes; inf: never."""
        if not self.can_idle or self.mode == "never":
            return math.inf
        return -math.inf if self.mode == "always" else self._last_mail + self.quiet_s

    def idle_limit_s(self) -> float:
        """The longest one IDLE lasts before a poll."""
        return self.period_s if self.mode == "always" else self.recheck_s

    def announced(self, now: float) -> None:
        """The server announced new mail during an IDLE: poll fast from now on."""
        self._last_mail = now
        self._empty_polls = 0
