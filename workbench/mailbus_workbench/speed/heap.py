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
costs a full pass, and what it would free is freed at the thaw anyway."""

from __future__ import annotations

import gc

# What is left (the model's kept messages and traces, tens of thousands of objects under
# a flood) still costs a full pass 15-25 ms; passes ten times rarer than the default
# (one per 100 second-generation ones, not 10) are ten times less likely to land on a key.
FULL_PASS_EVERY = 100
_default: tuple[int, int, int] | None = None  # the thresholds before the first freeze


def freeze() -> None:
    """Exempt every object tracked now from the collector's passes until `thaw`, and
    make full passes rarer."""
    global _default
    if _default is None:
        _default = gc.get_threshold()
        gc.set_threshold(_default[0], _default[1], FULL_PASS_EVERY)
    gc.freeze()


def thaw() -> None:
    """Hand the frozen objects back to the collector, at its usual pace."""
    global _default
    gc.unfreeze()
    if _default is not None:
        gc.set_threshold(*_default)
        _default = None


def frozen() -> int:
    return gc.get_freeze_count()
