"""The shared bounded wait (mailbus.stacks.waiting, re-exported by tests/waiting.py):
returns the first truthy value, fails with a message naming what it waited for, and
wakes on an event without polling."""

from __future__ import annotations

import threading

import pytest
from waiting import Signalled, eventually


def test_eventually_returns_the_first_truthy_value() -> None:
    seen = iter([0, None, "", "ready", "later"])
    assert eventually(lambda: next(seen), timeout=5) == "ready"


def test_eventually_fails_naming_what_and_the_last_value() -> None:
    with pytest.raises(
        AssertionError, match=r"timed out after 0.05 s waiting for the door \(last: 0\)"
    ):
        eventually(lambda: 0, 0.05, "the door")


def test_without_a_name_the_failure_quotes_the_condition() -> None:
    empty: list[int] = []
    with pytest.raises(AssertionError, match=r"waiting for .*len\(empty\) == 1"):
        eventually(lambda: len(empty) == 1, timeout=0.02)


def bump(counters: Signalled) -> None:
    counters["idles"] += 1  # the same `+=` the product code does


def test_a_signalled_counter_wakes_the_wait() -> None:
    counters = Signalled({})
    timer = threading.Timer(0.05, bump, [counters])
    timer.start()
    eventually(lambda: counters["idles"] >= 1, 5, "the counter", wake=counters.changed)
    timer.join(5)
    assert counters == {"idles": 1} and counters["missing"] == 0  # still a Counter
