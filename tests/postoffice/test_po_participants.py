"""Every participant in view over PostOffice: two real processes
announce themselves; the workbench's model in this process lists them with their wait
sets, drops the one that exits at its goodbye, and the one that is killed after its
missed periods."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import mailbus
import pytest
from mailbus.options import options_from_mapping
from mailbus_workbench.model.participants import Participant
from mailbus_workbench.model.state import WorkbenchModel

from .conftest import Daemon, wait_until

SCRIPT = Path(__file__).resolve().parents[1] / "presence_participant.py"
REPO = Path(__file__).resolve().parents[2]
PERIOD = 0.3


def options(daemon: Daemon, box: str) -> dict[str, Any]:
    return {
        "transport": "postoffice",
        "name": box.replace(".", "-"),
        "announce-period-s": PERIOD,
        "postoffice": {"port": daemon.port, "box": box, "password": "pw"},
    }


def spawn(daemon: Daemon, box: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "core")}
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT), json.dumps(options(daemon, box))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line == "ready", child.stderr.read() if child.stderr else line
    return child


def named(model: WorkbenchModel, name: str) -> Participant | None:
    model.pump()
    return next((p for p in model.participants.ordered() if p.name == name), None)


def waits(model: WorkbenchModel, name: str) -> bool:
    participant = named(model, name)
    return participant is not None and bool(participant.announcement.wait_sets)


@pytest.mark.slow
def test_the_workbench_model_sees_other_processes_and_drops_them(daemon: Daemon) -> None:
    model = WorkbenchModel()
    with mailbus.Context(options_from_mapping(options(daemon, "prs.watch"), {})) as watch:
        model.participants.own_gid = watch.participant_gid
        watch.tracer.add_listener(model.feed.listener)
        leaving, dying = spawn(daemon, "prs.a"), spawn(daemon, "prs.b")
        try:
            # Announced with their wait set (made just after init, so at the latest in
            # the follow-up announcement).
            wait_until(lambda: all(waits(model, n) for n in ("prs-a", "prs-b")), 20)
            a = named(model, "prs-a")
            assert a is not None and a.announcement.pid == leaving.pid
            assert a.announcement.transport == "postoffice"
            (loop,) = a.announcement.wait_sets
            assert loop.name == "worker/loop"
            assert [(e.kind, e.name) for e in loop.entities] == [("server", "prs/echo")]
            # The Wait sets view's rows: this process's none, each other's by process.
            processes = {row.process for row in model.wait_set_rows()}
            assert processes == {a.label, named(model, "prs-b").label}  # type: ignore[union-attr]
            assert watch.participant_gid in model.participants.participants  # itself too

            leaving.communicate(input="", timeout=30)  # exits: says goodbye
            wait_until(lambda: named(model, "prs-a") is None, 10)
            assert model.participants.dropped == 0  # gone by its goodbye, not by time

            dying.send_signal(signal.SIGKILL)  # no goodbye: gone after missed periods
            dying.wait(10)
            wait_until(lambda: named(model, "prs-b") is None, 10)
            assert model.participants.dropped == 1
            assert named(model, "prs-watch") is not None
        finally:
            for child in (leaving, dying):
                if child.poll() is None:
                    child.kill()
                child.communicate(timeout=10)
