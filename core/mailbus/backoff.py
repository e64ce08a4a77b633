"""Capped exponential back-off (sans-IO: the caller supplies the randomness)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before retry number `attempt` (1 = first retry): `initial * 2**(attempt-1)`,
    capped at `maximum`, then scaled by a jitter factor in [1 - jitter, 1] so that many
    participants that lost one server do not all come back in the same instant."""

    initial: float = 0.1
    maximum: float = 10.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError("need 0 < initial <= maximum")
        if not 0 <= self.jitter < 1:
            raise ValueError("need 0 <= jitter < 1")

    def delay(self, attempt: int, random: float = 1.0) -> float:
        """`random` is a number in [0, 1]; 1 gives the delay without jitter."""
        if attempt < 1:
            return 0.0
        # 2**60 already exceeds any cap; keep the exponent small to avoid overflow.
        raw = self.initial * 2.0 ** min(attempt - 1, 60)
        capped = min(raw, self.maximum)
        return capped * (1.0 - self.jitter * (1.0 - min(max(random, 0.0), 1.0)))
