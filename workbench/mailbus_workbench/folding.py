"""Folding the engine's queued events into the model on the UI thread, paced so that a
key never waits behind more than one slice of about 10 ms.

A refresh folds one slice (`model/pacing.py` sizes it); a backlog left is folded in
more slices, each a millisecond after the last. They are asyncio callbacks, not Textual
messages: Textual's message loop does not let the event loop turn while its queue holds
messages, and a key reaches the app's queue only when it turns (the driver hands it over
through the loop), so slices queued as messages would hold every key until the last."""

from __future__ import annotations

import asyncio
import time

from mailbus_workbench.model.pacing import FoldPacer
from mailbus_workbench.model.state import WorkbenchModel

SLICE_GAP_S = 0.001  # between two slices of a backlog: the keys' turn


class Folder:
    def __init__(self, model: WorkbenchModel, pacer: FoldPacer | None = None) -> None:
        self.model = model
        self.pacer = pacer or FoldPacer()
        self.slices = 0  # folds made as slices of a backlog (not by a refresh)
        self._queued = False  # a slice is due
        self._stopped = False

    def fold(self) -> int:
        """Fold one slice now and, if a backlog is left, the next a moment later."""
        model = self.model
        limit = self.pacer.limit()
        started = time.perf_counter()
        taken = model.pump(limit)
        self.pacer.folded(taken, time.perf_counter() - started)
        if not self._queued and self.pacer.another_slice(limit, taken, len(model.feed)):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # a caller without an event loop: the next fold goes on
                return taken
            self._queued = True
            loop.call_later(SLICE_GAP_S, self._slice)
        return taken

    def _slice(self) -> None:
        self._queued = False
        if not self._stopped:
            self.slices += 1
            self.fold()

    def stop(self) -> None:
        """No more slices (the app is ending)."""
        self._stopped = True
