"""Crash test: worker processes enqueue and send through a real SMTP server (smtp-sink)
and are SIGKILLed at random moments, >= 200 times; after each restart every committed
mail has been delivered (at least once, so exactly once after the receiver's dedup by
Message-ID), nothing foreign was delivered, extra copies are at most one per kill, and
nothing is left under data/. See outbox_crash_child.py for the procedure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from outbox_support import SmtpSink

RUNS = 200


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_and_leaves_nothing(
    tmp_path: Path, sink: SmtpSink
) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    child = Path(__file__).with_name("outbox_crash_child.py")
    proc = subprocess.run(
        [
            sys.executable,
            str(child),
            "--dir",
            str(tmp_path / "outbox"),
            "--sink-dir",
            str(sink.dump),
            "--port",
            str(sink.port),
            "--log",
            str(tmp_path / "sent.log"),
            "--runs",
            str(RUNS),
            "--seed",
            str(seed),
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"seed {seed}: {result}")
    assert result["failures"] == [], f"seed {seed}"
    assert result["kills"] >= RUNS * 0.9, result  # nearly every run ends in a SIGKILL
    assert result["committed"] > RUNS  # mail was really flowing
    # Every committed mail was delivered (checked per run by the driver, again here):
    assert result["delivered_unique"] >= result["committed"]
    assert result["delivered_unique"] <= result["intents"]
    assert result["extra_copies"] <= result["kills"]
    # The kills hit the interesting windows, and recovery had real work to do:
    phases = {k for k in result["last_event_before_kill"] if not k.startswith("restart")}
    assert {"e", "s", "t"} <= phases, result["last_event_before_kill"]
    assert result["runs_with_recovery"]["inflight_requeued"] > 0, result
    assert result["runs_with_recovery"]["uncommitted_removed"] > 0, result
    assert result["runs_with_recovery"]["set_aside"] == 0, result
