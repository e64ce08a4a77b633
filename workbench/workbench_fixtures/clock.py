"""The frozen clock every fixture is dated by: its start, and a clock that moves only when
told to. The events and the participants' announcements both read it, so it sits below
them (neither imports the other for it)."""

from __future__ import annotations

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC: the frozen clock starts here


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def ns(t: float) -> int:
    return round(t * 1e9)
