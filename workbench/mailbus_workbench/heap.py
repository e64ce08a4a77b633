"""Keep the collector's full passes short while the workbench runs (issue 15 item 8).

Once started, the app holds ~160,000 objects the cyclic garbage collector tracks
(modules, classes, widgets, Textual's caches); a full collection walks them all and was
measured at 100-250 ms on the UI thread, which a key pressed meanwhile waits behind.
Frozen after start-up, they are skipped: a full pass walks only what came since (7 ms
measured under the benchmark's flood). Objects frozen are still freed by reference
counting; only cycles among them (garbage at the time of the freeze included) wait for
`thaw`, which the app calls when it ends, so that a process running many apps (the
tests) keeps none of their cycles. No collection before freezing: it costs a full pass,
and what it would free is freed at the thaw anyway."""

from __future__ import annotations

import gc


def freeze() -> None:
    """Exempt every object tracked now from the collector's passes until `thaw`."""
    gc.freeze()


def thaw() -> None:
    """Hand the frozen objects back to the collector."""
    gc.unfreeze()


def frozen() -> int:
    return gc.get_freeze_count()
