"""Notebook benchmark: the live `Monitor` on the demo while the same context is flooded
at 10,000 messages/s (paced, in-process), beside the same flood with no monitor.

    python -m bench.notebook [--quick]

Figures (last stdout line, JSON):
- input_msgs_per_s: messages the monitor's model took in per second during the flood;
- widget_updates_per_s: snapshots pushed to the widget per second (bound: update_hz);
- kernel_cpu_share: the kernel process's CPU time over wall time during the flood (1.0
  = one core), with the monitor; baseline_cpu_share is the same flood without it,
  traced_baseline_cpu_share with tracing on and a listener that does nothing, and
  monitor_cpu_share the monitor's own part (kernel minus traced baseline);
- rss_mb_after_1m_msgs: resident memory once a million messages went through the
  monitor (the flood, then synthetic events fed to the listener at full speed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from mailbus.context import Context
from mailbus.demo import DemoSystem
from mailbus.notebook import Monitor
from mailbus.trace import Kind, TraceEvent

TARGET_RATE = 10_000
FLOOD_TOPICS = ("flood/a", "flood/b", "flood/c", "flood/d")
TOTAL = 1_000_000


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def flood(context: Context, seconds: float) -> tuple[int, float, float]:
    """Publish at TARGET_RATE for `seconds`: (sent, wall s, process CPU s)."""
    publishers = [context.publisher(t) for t in FLOOD_TOPICS]
    batch = TARGET_RATE // 100  # every 10 ms
    sent = 0
    cpu0, start = time.process_time(), time.perf_counter()
    next_at = start
    while (now := time.perf_counter()) - start < seconds:
        if now < next_at:
            time.sleep(next_at - now)  # pacing the flood, not synchronisation
            continue
        for _ in range(batch):
            publishers[sent % 4].publish(f'{{"n": {sent}, "v": {sent % 97}}}')
            sent += 1
        next_at += 0.01
    return sent, time.perf_counter() - start, time.process_time() - cpu0


def run(seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"target_rate_msgs_per_s": TARGET_RATE, "flood_s": seconds}
    # Baseline: the demo and the flood, nobody watching.
    with Context() as context:
        demo = DemoSystem(context, seed=1)
        demo.start()
        sent, wall, cpu = flood(context, seconds)
        demo.stop()
    out["baseline_published_msgs_per_s"] = sent / wall
    out["baseline_cpu_share"] = cpu / wall
    log(f"baseline: {sent / wall:,.0f} msg/s published, CPU share {cpu / wall:.2f}")
    # Tracing on with a listener that does nothing: what any trace listener costs.
    with Context() as context:
        context.tracer.add_listener(lambda event: None)
        demo = DemoSystem(context, seed=1)
        demo.start()
        sent, wall, cpu = flood(context, seconds)
        demo.stop()
    out["traced_baseline_cpu_share"] = cpu / wall
    log(f"tracing, no-op listener: CPU share {cpu / wall:.2f}")

    monitor = Monitor.demo(seed=1, fields=["flood/a.v", "robot/pose.x"])
    try:
        monitor.selected = "flood/a"
        seen0, updates0 = monitor.model.seen, monitor.updates
        received0 = sum(t["count"] for t in monitor.model.snapshot()["topics"])
        sent, wall, cpu = flood(monitor.context, seconds)
        snapshot = monitor.model.snapshot("flood/a")
        received = sum(t["count"] for t in snapshot["topics"]) - received0
        out["published_msgs_per_s"] = sent / wall
        out["input_msgs_per_s"] = received / wall
        out["trace_events_per_s"] = (monitor.model.seen - seen0) / wall
        out["widget_updates_per_s"] = (monitor.updates - updates0) / wall
        out["update_hz_bound"] = 1 / monitor._pacer.interval
        out["kernel_cpu_share"] = cpu / wall
        out["monitor_cpu_share"] = cpu / wall - out["traced_baseline_cpu_share"]
        out["snapshot_json_bytes"] = len(json.dumps(snapshot))
        log(
            f"monitor: {received / wall:,.0f} msg/s in, {out['widget_updates_per_s']:.1f} "
            f"updates/s, CPU share {cpu / wall:.2f}"
        )
        # The rest of a million messages at full speed, straight into the listener.
        listener = monitor.model.listener
        for n in range(received, TOTAL):
            body = f'{{"n": {n}, "v": {n % 97}}}'
            listener(
                TraceEvent(
                    Kind.RECEIVED,
                    time.time_ns(),
                    name=FLOOD_TOPICS[n % 4],
                    sequence_number=n,
                    message_id=f"<{n}@bench>",
                    body=body,
                    size=len(body),
                    detail="message",
                )
            )
        out["kept_events"] = monitor.frame().height
        out["rss_mb_after_1m_msgs"] = rss_mb()
        log(f"after 1M messages: RSS {out['rss_mb_after_1m_msgs']:.0f} MB")
    finally:
        monitor.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 3 s flood instead of 10 s")
    args = parser.parse_args()
    result = run(3.0 if args.quick else 10.0)
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
