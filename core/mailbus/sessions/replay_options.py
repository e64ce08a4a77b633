"""What a replay is told, checked: offsets, rates, name prefixes, filters and name remaps."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mailbus.names import check_name

if TYPE_CHECKING:
    pass


# Offsets are held in int64 nanoseconds: a finite offset beyond this (292 years, far past
# the end of any session) is clamped rather than overflowing the conversion.
MAX_OFFSET_S = (2**63 - 1) / 1e9


def check_offset(value: float, what: str) -> float:
    """`value` seconds if it is a finite number >= 0, else ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def check_rate(rate: float) -> float:
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise ValueError(f"rate must be a number, got {rate!r}")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive finite factor, got {rate!r}")
    return float(rate)


def check_prefix(prefix: str) -> str:
    """`prefix` if every name put after it is a valid name, else InvalidNameError."""
    if prefix:
        check_name(prefix + "x", "replay prefix")  # leading space, CR/LF, too long: refused
    return prefix


def offset_ns(seconds: float) -> int:
    return int(min(seconds, MAX_OFFSET_S) * 1e9)


def compile_filter(pattern: str | None, what: str) -> re.Pattern[str] | None:
    """The compiled name filter, or ValueError saying which one is malformed."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"bad {what} filter {pattern!r}: {exc}") from None
    except RecursionError:
        raise ValueError(f"bad {what} filter: too deeply nested") from None


def parse_remap(items: Sequence[str]) -> dict[str, str]:
    """`OLD=NEW` pairs from the command line."""
    remap: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--remap expects OLD=NEW, got {item!r}")
        remap[old] = check_name(new, "topic")
    return remap
