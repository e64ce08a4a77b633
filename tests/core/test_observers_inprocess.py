"""Observers see the whole conversation in-process. The in-process
transport is one context's loopback, so the workbench's model and a recorder observe the
context that holds the client and the server (the demo's case); every call shows as
answered, live and after analysis."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import mailbus
import pytest
from mailbus.sessions import analysis
from mailbus.sessions.recorder import Recorder
from mailbus_workbench.model.services import TraceStatus
from mailbus_workbench.model.state import WorkbenchModel
from waiting import eventually

pytestmark = pytest.mark.slow


def test_observers_see_every_response_in_process(tmp_path: Path) -> None:
    calls = 10
    model = WorkbenchModel(service_timeout_s=30.0)
    with mailbus.Context() as ctx:
        ctx.tracer.add_listener(model.feed.listener)
        recorder = Recorder(tmp_path / "session", context=ctx)
        server = ctx.server("obs/echo")
        stop = threading.Event()

        def serve() -> None:
            while not stop.is_set():
                request = mailbus.wait_for_request(server, 0.05)
                if request is not None:
                    server.send_response(request, f"echo: {request.body}")

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            client = ctx.client("obs/echo")
            answers = [client.call(f"call {n}", 10.0).body for n in range(calls)]
        finally:
            stop.set()
            thread.join(10)
        assert answers == [f"echo: call {n}" for n in range(calls)]

        def answered() -> bool:
            model.pump()
            return model.services.counts(time.time())[TraceStatus.ANSWERED] >= calls

        eventually(answered, 10, f"{calls} answered calls in the observer's model")
        recorder.stop()
    row = analysis.service_stats([tmp_path / "session"]).row(0, named=True)
    assert (row["requests"], row["answered"], row["orphans"]) == (calls, calls, 0)
