"""Helpers of the session tests (a module name of its own: every part's tests have a
conftest.py, so `from conftest import ...` could find another part's)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mailbus.sessions.recorder import Recorder
from mailbus.trace import TraceEvent

ROOT = Path(__file__).resolve().parents[2]
# The benchmarks' session generators (bench/) make the large sessions some tests compare.
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
SAMPLES = ROOT / "sample_sessions"
SAMPLE_NAMES = ("demo", "slow_service", "gaps")
T = 1_700_000_000_000_000_000  # the tiny session's epoch, ns
MS = 1_000_000


def write_session(path: Path, events: list[TraceEvent], **options: Any) -> Path:
    """A session holding exactly `events`, written through the recorder's own path."""
    recorder = Recorder(path, participant="test@localhost", transport="inprocess", **options)
    for event in events:
        recorder.listener(event)
    recorder.stop()
    return path


def tiny_events() -> list[TraceEvent]:
    """The session whose analysis tests/sessions/test_analysis.py computes by hand."""
    ev: list[TraceEvent] = []
    # Topic a: published and received 4 messages; latencies 1, 2, 3, 5 ms.
    for i, (sent, latency) in enumerate([(0, 1), (10, 2), (20, 3), (40, 5)], start=1):
        common = dict(name="a", source_gid="P1", sequence_number=i, message_id=f"<a{i}@t>")
        ev.append(
            TraceEvent(
                "message.published",
                T + sent * MS,
                gid="P1",
                source_timestamp_ns=T + sent * MS,
                body=f"m{i}",
                size=2,
                headers={"Publisher-GID": "P1"},
                **common,  # type: ignore[arg-type]
            )
        )
        ev.append(
            TraceEvent(
                "email.received",
                T + (sent + latency) * MS,
                source_timestamp_ns=T + sent * MS,
                reception_timestamp_ns=T + (sent + latency) * MS,
                body=f"m{i}",
                size=2,
                detail="message",
                **common,  # type: ignore[arg-type]
            )
        )
    # Topic b: only received; sequence 1, 3, 2, 5, 5 (one missing, one reordered, one
    # duplicate); every 10 ms, 4 ms latency.
    for k, seq in enumerate([1, 3, 2, 5, 5]):
        sent = T + (100 + 10 * k) * MS
        ev.append(
            TraceEvent(
                "email.received",
                sent + 4 * MS,
                name="b",
                source_gid="P2",
                sequence_number=seq,
                message_id=f"<b{k}@t>",
                source_timestamp_ns=sent,
                reception_timestamp_ns=sent + 4 * MS,
                body="xyz",
                size=3,
                detail="message",
            )
        )
    # Service svc: r1 answered in 5 ms; r2 in 20 ms plus a duplicate; r3 never (orphan);
    # r4 answered after 100 ms but discarded by the client (late).
    for i, sent in enumerate([0, 10, 40, 50], start=1):
        ev.append(
            TraceEvent(
                "request.sent",
                T + sent * MS,
                name="svc",
                gid="C1",
                source_gid="C1",
                sequence_number=i,
                message_id=f"<r{i}@t>",
                source_timestamp_ns=T + sent * MS,
                body=f"[{i}]",
                size=3,
            )
        )
    for mid, request, at in [("s1", 1, 5), ("s2", 2, 30), ("s2b", 2, 31), ("s4", 4, 150)]:
        ev.append(
            TraceEvent(
                "email.received",
                T + at * MS,
                name="svc",
                source_gid="S1",
                sequence_number=request,
                message_id=f"<{mid}@t>",
                in_reply_to=f"<r{request}@t>",
                references=(f"<r{request}@t>",),
                source_timestamp_ns=T + (at - 1) * MS,
                reception_timestamp_ns=T + at * MS,
                body="ok",
                size=2,
                detail="response",
            )
        )
    for request, at in [(1, 5), (2, 30)]:
        ev.append(
            TraceEvent(
                "response.matched",
                T + at * MS,
                name="svc",
                gid="C1",
                source_gid="S1",
                sequence_number=request,
                in_reply_to=f"<r{request}@t>",
            )
        )
    return ev


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` read-only for this process: mode 0555, and for root (whom modes do not
    stop) the immutable attribute."""
    mode = path.stat().st_mode
    path.chmod(0o555)
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(path)], check=True, timeout=10)
    try:
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(path)], check=True, timeout=10)
        path.chmod(mode)
