"""Bounded waits: `eventually()`, for the stacks' starters, the tests and the benchmarks.

A wait is always bounded and fails with an AssertionError that says what it waited for.
Polling backs off from 1 ms to 50 ms, so a condition that holds soon costs almost
nothing; a test that can be told when to look again passes `wake` (a threading.Event
set by a trace listener or a counter) and is woken at once instead of polling.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE_S = 0.001
LONGEST_PAUSE_S = 0.05
# With `wake`, the event ends each wait; this cap only guards against a wake-up that
# came between the check and the wait being lost to a listener's ordering.
WAKE_SAFETY_S = 1.0


def describe(condition: Callable[[], object]) -> str:
    """The condition's source line (a lambda's text says best what was awaited)."""
    try:
        text = " ".join(inspect.getsource(condition).split())
    except (OSError, TypeError):
        return repr(condition)
    return text if len(text) <= 200 else text[:197] + "..."


def eventually(
    condition: Callable[[], T],
    timeout: float = 10.0,
    what: str | None = None,
    *,
    wake: threading.Event | None = None,
    longest_pause: float = LONGEST_PAUSE_S,
) -> T:
    """Call `condition` until it returns something truthy and return that; fail after
    `timeout` seconds with an AssertionError naming `what` (or the condition's source)
    and the last value seen. `longest_pause` caps the back-off: a condition that asks
    a starting server (a JVM, JupyterLab) is asked less often, not to slow it down."""
    deadline = time.monotonic() + timeout
    pause = FIRST_PAUSE_S
    while True:
        if wake is not None:
            wake.clear()  # before the check: a change after it sets the event again
        result = condition()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            awaited = what or describe(condition)
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {awaited} (last: {result!r})"
            )
        if wake is not None:
            wake.wait(min(remaining, WAKE_SAFETY_S))
        else:
            time.sleep(min(pause, remaining))  # polling, bounded by the deadline
            pause = min(pause * 2, longest_pause)


class Signalled(Counter[str]):
    """A Counter that sets `changed` on every write: put in place of an object's
    in-process counters, a test waits on the event instead of polling the numbers."""

    def __init__(self, counters: Mapping[str, int]) -> None:
        super().__init__(counters)
        self.changed = threading.Event()

    def __setitem__(self, key: str, value: int) -> None:
        super().__setitem__(key, value)
        self.changed.set()
