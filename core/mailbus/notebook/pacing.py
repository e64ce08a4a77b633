"""How often the kernel pushes a snapshot to the browser: at most `max_hz`, whatever the
message rate (the listener only counts; a separate thread sends)."""

from __future__ import annotations

MAX_UPDATE_HZ = 20.0


class UpdatePacer:
    """`due(now)` is True at most `hz` times per second of `now` (monotonic seconds)."""

    def __init__(self, hz: float) -> None:
        if not 0 < hz <= MAX_UPDATE_HZ:
            raise ValueError(f"update rate must be in (0, {MAX_UPDATE_HZ:g}] Hz, not {hz!r}")
        self.interval = 1.0 / hz
        self._next = float("-inf")
        self.sent = 0

    def due(self, now: float) -> bool:
        if now < self._next:
            return False
        # Schedule from now, not from the last slot: a stalled kernel never bursts to catch up.
        self._next = now + self.interval
        self.sent += 1
        return True

    def wait_s(self, now: float) -> float:
        """Seconds until the next update may go."""
        return max(0.0, self._next - now)
