"""What a full sink queue does to a publisher: back-pressure or a counted drop.

The default blocks the publisher until the sink has room (at most `timeout` seconds,
then PublishTimeoutError names the sink), so nothing is ever dropped unless a module or
a link asks for it. A drop is always counted on the sink and traced as `broker.dropped`.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_CAPACITY = 10_000
DEFAULT_BLOCK_TIMEOUT = 10.0


class Overflow(StrEnum):
    BLOCK = "block"  # wait for room (bounded by the timeout), never drop
    DROP_NEWEST = "drop_newest"  # discard the message that does not fit
    DROP_OLDEST = "drop_oldest"  # discard the oldest queued message to make room


@dataclass(frozen=True, slots=True)
class Backpressure:
    """`timeout` (seconds, None = wait for ever) applies to BLOCK only."""

    overflow: Overflow = Overflow.BLOCK
    timeout: float | None = DEFAULT_BLOCK_TIMEOUT

    def __post_init__(self) -> None:
        object.__setattr__(self, "overflow", Overflow(self.overflow))
        if self.timeout is not None and (math.isnan(self.timeout) or self.timeout < 0):
            raise ValueError(f"back-pressure timeout must be >= 0 or None, got {self.timeout}")
        if self.timeout is not None and self.timeout > threading.TIMEOUT_MAX:
            # For ever, spelt the one way (and no wait can overflow on 1e300 or inf).
            object.__setattr__(self, "timeout", None)

    def describe(self) -> str:
        if self.overflow is not Overflow.BLOCK:
            return self.overflow.value
        return "block" if self.timeout is None else f"block {self.timeout:g}s"


DEFAULT_BACKPRESSURE = Backpressure()
