"""Seeded faults on what a bus sends: drop, delay, duplicate, reorder.

Every decision comes from one `random.Random(seed)` drawn in the order emails are sent,
so a run with the same seed and the same sends makes the same decisions; the seed is
printed with a failure (`--mailbus-seed` runs it again). Delays run on a timer thread,
so a delayed email overtakes nothing it should not: only what was sent after it.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from mailbus.email_message import Email
from mailbus.transport import EmailSender


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Probabilities (0 to 1) per email; `delay` is (probability, seconds)."""

    seed: int
    drop: float = 0.0
    delay: tuple[float, float] = (0.0, 0.0)
    duplicate: float = 0.0
    reorder: float = 0.0

    def __post_init__(self) -> None:
        for name, p in (
            ("drop", self.drop),
            ("delay", self.delay[0]),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"faults: {name} is a probability from 0 to 1, got {p}")
        if not 0.0 <= self.delay[1] <= 60.0:
            raise ValueError(f"faults: a delay is 0 to 60 seconds, got {self.delay[1]}")

    def describe(self) -> str:
        parts = [f"seed={self.seed}"]
        for name, value in (
            ("drop", self.drop),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ):
            if value:
                parts.append(f"{name}={value}")
        if self.delay[0]:
            parts.append(f"delay=({self.delay[0]}, {self.delay[1]})")
        return "faults(" + ", ".join(parts) + ")"


@dataclass(slots=True)
class FaultLog:
    """What the faults did, in send order (shown with a failure)."""

    dropped: int = 0
    delayed: int = 0
    duplicated: int = 0
    reordered: int = 0
    decisions: list[str] = field(default_factory=list)


class FaultSender(EmailSender):
    """Passes emails to `inner`, applying the plan set with `inject` (none: untouched)."""

    def __init__(self, inner: EmailSender) -> None:
        self.inner = inner
        self.plan: FaultPlan | None = None
        self.log = FaultLog()
        self._random = random.Random(0)
        self._held: Email | None = None  # an email waiting to be sent after the next
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []

    def inject(self, plan: FaultPlan | None) -> None:
        with self._lock:
            self.plan = plan
            self.log = FaultLog()
            self._random = random.Random(plan.seed if plan else 0)
        if plan is None:
            self.flush()

    def deliver(self, email: Email) -> None:
        plan = self.plan
        if plan is None:
            self.inner.deliver(email)
            return
        with self._lock:
            r = self._random
            # Draw every number every time: a decision never shifts the next ones.
            drop, delay, duplicate, reorder = r.random(), r.random(), r.random(), r.random()
            log = self.log
            if drop < plan.drop:
                log.dropped += 1
                log.decisions.append(f"drop {email.subject}")
                return
            out = [email, email] if duplicate < plan.duplicate else [email]
            if len(out) == 2:
                log.duplicated += 1
            held, self._held = self._held, None
            if reorder < plan.reorder and held is None:
                log.reordered += 1
                log.decisions.append(f"hold {email.subject}")
                self._held = email
                out = out[1:]
            if held is not None:
                out.append(held)
            late = delay < plan.delay[0]
            if late:
                log.delayed += 1
                log.decisions.append(f"delay {email.subject}")
        if late and out:
            timer = threading.Timer(plan.delay[1], self._send_all, (out,))
            timer.daemon = True
            self._timers.append(timer)
            timer.start()
        else:
            self._send_all(out)

    def _send_all(self, emails: list[Email]) -> None:
        for email in emails:
            self.inner.deliver(email)  # validated once, by send()

    def flush(self) -> None:
        """Send a held email now (the plan ended); delayed ones go on their timers."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            self.inner.send(held)

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self.inner.close()
