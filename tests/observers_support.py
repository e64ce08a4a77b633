"""The observer scenario, shared by the transports' tests: a client and
a server in two processes, the workbench's model and a recorder as two more participants
in this one; every call must show as answered, live and after analysis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mailbus
from mailbus.options import options_from_mapping
from mailbus.sessions import analysis
from mailbus.sessions.recorder import Recorder
from mailbus_workbench.model.services import TraceStatus
from mailbus_workbench.model.state import WorkbenchModel
from waiting import eventually

SCRIPT = Path(__file__).with_name("observer_participant.py")
REPO = Path(__file__).resolve().parents[1]


def _spawn(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "core")}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def run_scenario(
    options: Mapping[str, Mapping[str, Any]],
    session: Path,
    calls: int = 10,
    answers_expected: bool = True,
) -> tuple[WorkbenchModel, dict[str, Any]]:
    """`options` holds the raw options of the roles `server`, `client`, `watch`
    (the workbench model) and `record` (the recorder). Returns the model and the
    analysed services row of the session."""
    model = WorkbenchModel(service_timeout_s=30.0)
    with (
        mailbus.Context(options_from_mapping(dict(options["watch"]), {})) as watch,
        mailbus.Context(options_from_mapping(dict(options["record"]), {})) as rec,
    ):
        watch.tracer.add_listener(model.feed.listener)
        traced = threading.Event()  # set after the model's feed has queued each event
        watch.tracer.add_listener(lambda _event: traced.set())
        recorder = Recorder(session, context=rec)
        server = _spawn("server", json.dumps(options["server"]))
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "ready", server.stderr.read()  # type: ignore[union-attr]
            client = _spawn("client", json.dumps(options["client"]), str(calls))
            out, err = client.communicate(timeout=300)
            assert out.strip() == f"answered {calls}", err
        finally:
            server.communicate(input="", timeout=60)

        def observed() -> bool:
            model.pump()
            counts = model.services.counts(time.time())
            seen = counts[TraceStatus.ANSWERED] if answers_expected else len(model.services)
            return seen >= calls

        # The observers' copies may still be on their way: wait, bounded.
        try:
            eventually(observed, 30, f"the observer to see {calls} calls", wake=traced)
        finally:
            recorder.stop()
    services = analysis.service_stats([session])
    row = services.row(0, named=True) if services.height else {}
    return model, row


def check(model: WorkbenchModel, row: dict[str, Any], calls: int = 10) -> None:
    counts = model.services.counts(time.time())
    assert counts[TraceStatus.ANSWERED] == calls, counts
    assert counts[TraceStatus.TIMED_OUT] == counts[TraceStatus.ORPHANED] == 0, counts
    assert (row["requests"], row["answered"], row["orphans"]) == (calls, calls, 0), row
