"""Keep the collector's full passes short and rare while the workbench runs
(process-wide: only in the `mailbus` command's own process, see speed/__init__.py).

Once started, the app holds ~160,000 objects the cyclic garbage collector tracks
(modules, classes, widgets, Textual's caches); a full collection walks them all and was
measured at 100-250 ms on the UI thread, which a key pressed meanwhile waits behind.
Frozen after start-up, they are skipped: a full pass walks only what came since (a few
ms; 15-25 ms of CPU once the model holds a flood's messages). Objects frozen are still
freed by reference counting; only cycles among them (garbage at the time of the freeze
included) wait for `thaw`, which the app calls when it ends, so that a process running
many apps (the tests) keeps none of their cycles. No collection before freezing: it
costs a full pass, and what it would free is freed at the thaw anyway.

What comes after start-up can outgrow it: a system of 10,000 topics brings 200,000
objects more (each topic's figures, rates and last messages), and a full pass over them
took 100-250 ms again. So a full pass that took longer than LONG_FULL_PASS_S is the last
of its size: the app freezes again at its next refresh (`freeze_if_due`). Right after a
full pass almost everything left is alive, so that freeze holds back almost no garbage;
what it holds is the model's data, freed by reference counting when it goes (a message
record, a topic's figures hold no cycles).

That full pass itself, the first after the names arrived, still landed on a key now and
then (260 ms, once per run of `bench.workbench`). So the app also freezes when the
model has grown by GROWTH_NAMES names since its last such freeze (`freeze_if_grown`):
the names and what each brought are frozen as they come, before a pass walks them."""

from __future__ import annotations

import gc
import time
from typing import Any

# What is left (the model's kept messages and traces, tens of thousands of objects under
# a flood) still costs a full pass 15-25 ms; passes ten times rarer than the default
# (one per 100 second-generation ones, not 10) are ten times less likely to land on a key.
FULL_PASS_EVERY = 100
# A full pass longer than this walked more than the few thousand objects left after a
# freeze: what came since is frozen too (at most once per pass, at the next refresh).
LONG_FULL_PASS_S = 0.010
# Topics and participants come with ~20 tracked objects each (figures, rates, kept
# messages, tree nodes): this many more since the last freeze are frozen too.
GROWTH_NAMES = 1_000
_default: tuple[int, int, int] | None = None  # the thresholds before the first freeze
_names_frozen = 0  # the model's names at the last freeze for growth
_pass_started: float | None = None
_freeze_due = False


def _watch(phase: str, info: dict[str, Any]) -> None:
    global _pass_started, _freeze_due
    if info["generation"] != 2:
        return
    if phase == "start":
        _pass_started = time.perf_counter()
    elif _pass_started is not None:
        _freeze_due = _freeze_due or time.perf_counter() - _pass_started > LONG_FULL_PASS_S
        _pass_started = None


def freeze() -> None:
    """Exempt every object tracked now from the collector's passes until `thaw`, and
    make full passes rarer."""
    global _default
    if _default is None:
        _default = gc.get_threshold()
        gc.set_threshold(_default[0], _default[1], FULL_PASS_EVERY)
        gc.callbacks.append(_watch)
    _freeze()


def freeze_if_due() -> bool:
    """Freeze again if a full pass took long since the last freeze (frozen mode only)."""
    if _default is None or not _freeze_due:
        return False
    _freeze()
    return True


def freeze_if_grown(names: int) -> bool:
    """Freeze again if the model holds GROWTH_NAMES more names (topics, participants)
    than at the last freeze for growth, or at its fewest since (frozen mode only)."""
    global _names_frozen
    _names_frozen = min(_names_frozen, names)  # cleared topics, participants gone
    if _default is None or names - _names_frozen < GROWTH_NAMES:
        return False
    _names_frozen = names
    _freeze()
    return True


def _freeze() -> None:
    global _freeze_due
    _freeze_due = False
    gc.freeze()


def thaw() -> None:
    """Hand the frozen objects back to the collector, at its usual pace."""
    global _default, _freeze_due, _pass_started, _names_frozen
    gc.unfreeze()
    _names_frozen = 0
    if _default is not None:
        gc.set_threshold(*_default)
        _default = None
        gc.callbacks.remove(_watch)
    _freeze_due = False
    _pass_started = None


def frozen() -> int:
    return gc.get_freeze_count()
