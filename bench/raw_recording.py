"""What recording the raw column costs: received emails through `Recorder.listener` to
zstd Parquet, with the default `raw_cap` (raw bytes recorded) beside `raw_cap=0` (the
baseline, no raw bytes) in the same run: events/s, CPU time per event (both threads;
steadier than wall time on a shared machine) and bytes on disk per event.

    python -m bench.raw_recording [--quick] [--events N]

The emails are what an IMAP receiver hands over for a small JSON message (a Received
line, the Mailbus headers, about 1 KB), each with its own Message-ID and timestamps.
Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mailbus.email_message import Email, to_bytes
from mailbus.sessions.recorder import DEFAULT_RAW_CAP, Recorder
from mailbus.trace import TraceEvent

T0 = 1_800_000_000_000_000_000
BODY = '{"x": 0.5, "y": 1.25, "theta": 3.14159, "note": "a typical small body ...."}'


def make_events(count: int) -> list[TraceEvent]:
    events = []
    for i in range(count):
        topic = f"robot/topic{i % 20}"
        sent = T0 + i * 100_000 - 300_000
        headers = {
            "Source-Timestamp": str(sent),
            "Publisher-GID": f"{i % 20:032x}",
            "Publisher-Sequence-Number": str(i // 20 + 1),
        }
        message_id = f"<{i:032x}@bench>"
        email = Email(
            subject=topic,
            body=BODY,
            sender="robot@mailbus.test",
            to=("lab@mailbus.test",),
            headers=headers,
            message_id=message_id,
        )
        raw = (
            b"Return-Path: <robot@mailbus.test>\r\nDelivered-To: lab@mailbus.test\r\n"
            b"Received: from 127.0.0.1 by mx.mailbus.test with LMTP id %d; "
            b"Fri, 15 Jan 2027 08:00:12 +0000\r\n" % i
        ) + to_bytes(email, date="Fri, 15 Jan 2027 08:00:12 +0000")
        events.append(
            TraceEvent(
                "email.received",
                T0 + i * 100_000,
                name=topic,
                source_gid=headers["Publisher-GID"],
                sequence_number=i // 20 + 1,
                message_id=message_id,
                source_timestamp_ns=sent,
                reception_timestamp_ns=T0 + i * 100_000,
                body=BODY,
                size=len(BODY),
                headers=headers,
                detail="message",
                raw=raw,
            )
        )
    return events


def record(events: list[TraceEvent], directory: Path, raw_cap: int) -> dict[str, Any]:
    recorder = Recorder(directory, raw_cap=raw_cap, participant="bench@localhost")
    limit = recorder.max_queued // 2
    idle = threading.Event()
    listener = recorder.listener
    started = time.perf_counter()
    cpu_started = time.process_time()
    for i, event in enumerate(events):
        if i % 1000 == 0:
            while recorder.queued > limit:  # back off: measure the sustained rate
                idle.wait(0.001)
        listener(event)
    manifest = recorder.stop()
    elapsed = time.perf_counter() - started
    cpu_us = (time.process_time() - cpu_started) / len(events) * 1e6
    on_disk = sum(part["bytes"] for part in manifest["parts"])
    assert manifest["counts"]["dropped"] == 0
    return {
        "events_per_s": len(events) / elapsed,
        "cpu_us": cpu_us,
        "bytes_per_event": on_disk / len(events),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--events", type=int)
    args = parser.parse_args()
    count = args.events or (20_000 if args.quick else 200_000)
    print(f"building {count} received events with raw bytes", flush=True)
    events = make_events(count)
    raw_size = sum(len(e.raw or b"") for e in events) / count
    print(f"raw bytes per email: {raw_size:.0f}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="bench-raw-"))
    try:
        results: dict[str, dict[str, Any]] = {}
        for round_ in range(3):  # alternate, keep the best of three: a shared machine
            for name, cap in (("baseline", 0), ("raw", DEFAULT_RAW_CAP)):
                got = record(events, root / f"{name}-{round_}", cap)
                print(f"{name} (raw_cap={cap}) round {round_}: {got}", flush=True)
                best = results.setdefault(name, dict(got))
                best["events_per_s"] = max(best["events_per_s"], got["events_per_s"])
                best["cpu_us"] = min(best["cpu_us"], got["cpu_us"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    raw, base = results["raw"], results["baseline"]
    figures = {
        "events": count,
        "raw_bytes_per_email": round(raw_size),
        "recorder_events_per_s_raw": round(raw["events_per_s"]),
        "baseline_recorder_events_per_s": round(base["events_per_s"]),
        "throughput_ratio": round(raw["events_per_s"] / base["events_per_s"], 3),
        "cpu_us_per_event_raw": round(raw["cpu_us"], 2),
        "baseline_cpu_us_per_event": round(base["cpu_us"], 2),
        "cpu_ratio": round(raw["cpu_us"] / base["cpu_us"], 3),
        "disk_bytes_per_event_raw": round(raw["bytes_per_event"], 1),
        "baseline_disk_bytes_per_event": round(base["bytes_per_event"], 1),
        "disk_ratio": round(raw["bytes_per_event"] / base["bytes_per_event"], 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
