"""Stopping the polling manager after a start that Ctrl-C cut short: Thread.start()
waits for the new thread, a KeyboardInterrupt can land there, and Context's clean-up
then stopped a thread that never started. join() raised RuntimeError ("cannot join
thread before it is started") and the user got a traceback instead of one line (seen in
tests/shell/test_interrupt.py under load)."""

from __future__ import annotations

import threading

import pytest
from mailbus.polling import PollingManager
from mailbus.trace import Tracer
from test_signing_gate import ListReceiver


def test_stop_after_a_start_cut_short_by_ctrl_c_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted_start(self: threading.Thread) -> None:
        raise KeyboardInterrupt  # as Ctrl-C lands inside Thread.start(), before the thread runs

    manager = PollingManager(ListReceiver(), [], Tracer(), lambda _: None, 0.01)
    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    with pytest.raises(KeyboardInterrupt):
        manager.start()
    monkeypatch.undo()
    manager.stop(timeout=1.0)
    assert not manager.alive
