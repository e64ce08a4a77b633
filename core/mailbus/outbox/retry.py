"""How long a failed send waits before the next attempt, and which failures are final."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mailbus.errors import ConfigError, EmailFormatError, InvalidNameError


def is_permanent(exc: BaseException) -> bool:
    """A failure that retrying cannot fix: the email itself is invalid, or the sender
    marked the error `permanent` (an SMTP 5xx reply, for instance)."""
    return isinstance(exc, EmailFormatError | InvalidNameError) or bool(
        getattr(exc, "permanent", False)
    )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential back-off with jitter, then a dead letter.

    Defaults follow SMTP practice scaled to messaging: retry after 5 s, doubling up to
    15 minutes between attempts, and give up after 30 attempts or 3 days (Postfix keeps
    mail 5 days; messages older than a few days are rarely still wanted).
    """

    first_delay_s: float = 5.0
    factor: float = 2.0
    max_delay_s: float = 900.0
    max_attempts: int = 30
    max_age_s: float = 3 * 86400.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not self.first_delay_s >= 0 or not self.max_delay_s >= self.first_delay_s:
            raise ConfigError("outbox.first-delay-s", "need 0 <= first-delay-s <= max-delay-s")
        if not self.factor >= 1.0:
            raise ConfigError("outbox.factor", "must be >= 1")
        if self.max_attempts < 1:
            raise ConfigError("outbox.max-attempts", "must be >= 1")
        if not self.max_age_s > 0:
            raise ConfigError("outbox.max-age-s", "must be > 0")
        if not 0 <= self.jitter < 1:
            raise ConfigError("outbox.jitter", "must be in [0, 1)")

    def delay_s(self, attempts: int, rand: float = 0.5) -> float:
        """Seconds to wait after the `attempts`-th failed attempt (1-based); `rand` in
        [0, 1) spreads retries of many mails over +-jitter."""
        exponent = min(max(attempts - 1, 0), 64)
        base = min(self.first_delay_s * self.factor**exponent, self.max_delay_s)
        return float(base * (1 + self.jitter * (2 * rand - 1)))

    def gives_up(self, attempts: int, age_s: float) -> bool:
        return attempts >= self.max_attempts or age_s >= self.max_age_s

    KEYS = {
        "first-delay-s": float,
        "factor": float,
        "max-delay-s": float,
        "max-attempts": int,
        "max-age-s": float,
        "jitter": float,
    }

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any]) -> RetryPolicy:
        """From the `[outbox]` options table (keys with `-`, e.g. `max-attempts`)."""
        fields = cls.KEYS
        values: dict[str, Any] = {}
        for key, kind in fields.items():
            if key not in section:
                continue
            value = section[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"outbox.{key}", f"expected a number, got {value!r}")
            if kind is int and not isinstance(value, int):
                raise ConfigError(f"outbox.{key}", f"expected an integer, got {value!r}")
            values[key.replace("-", "_")] = kind(value)
        return cls(**values)
