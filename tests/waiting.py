"""Bounded waits for every test: `eventually()` (mailbus.stacks.waiting, shared with the
stacks' starters and the benchmarks) and its async Pilot twin `until()`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mailbus.stacks.waiting import Signalled, describe, eventually

if TYPE_CHECKING:
    from textual.pilot import Pilot

__all__ = ["Signalled", "describe", "eventually", "until"]


async def until(
    pilot: Pilot[object], condition: Callable[[], object], what: str, timeout: float = 30.0
) -> None:
    """`eventually()` for a Textual app under Pilot: lets the app run between checks.
    The bound is generous (a passing test returns at once): under the whole suite on two
    cores an export or a worker took more than 10 s now and then."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(0.02)
