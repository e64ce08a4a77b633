"""The module broker: throughput at full speed and latency at a paced 10,000 msg/s, one
source to one sink and one source to eight sinks, beside a raw `queue.Queue` worker
per sink (the baseline) measured in the same run, interleaved: throughput as the median
of repeats, latency over short alternating chunks.

    python -m bench.broker [--quick | --smoke]

A message that never arrives is counted in `lost` (the figures of that run are then not
meaningful); the JSON line is printed anyway and the exit status is then 1.

The reference (C on nanomsg) moved ~73,000 msg/s at 20 us average latency. Last stdout
line: one JSON object (keys in shared/BENCH.md, plus baselines and ratios).
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from mailbus.broker import Broker, BrokerMessage, decode, encode
from mailbus.trace import Tracer

REFERENCE_MSGS_PER_S = 73_000
PACED_RATE = 10_000
PAYLOAD = b"0123456789abcdef"
SINK_WAIT_S = 120.0  # how long a run waits for its sinks before counting the rest lost
clock = time.perf_counter_ns


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Sink:
    """Stamps each arrival; sets `done` at the expected count."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.arrivals = [0] * expected
        self.count = 0
        self.done = threading.Event()

    def receive(self, message: BrokerMessage) -> None:
        self.arrivals[self.count] = clock()
        self.count += 1
        if self.count == self.expected:
            self.done.set()

    def destroy(self) -> None:
        pass


class Source:
    def receive(self, message: BrokerMessage) -> None:
        pass

    def destroy(self) -> None:
        pass


def pace(count: int, rate: float | None, send: Callable[[int], None]) -> list[int]:
    """Call send(i) `count` times, at `rate` per second (None: as fast as possible);
    return the send times. Sleeping (not spinning) lets the workers have the GIL."""
    sent = [0] * count
    if rate is None:
        for i in range(count):
            sent[i] = clock()
            send(i)
        return sent
    period = int(1e9 / rate)
    start = clock() + 1_000_000
    for i in range(count):
        target = start + i * period
        now = clock()
        if target > now:
            time.sleep((target - now) / 1e9)
        sent[i] = clock()
        send(i)
    return sent


class Run:
    def __init__(
        self, sinks: list[Sink], sent: list[int], started: int, lost: int, cpu_s: float
    ) -> None:
        self.sinks = sinks
        self.sent = sent
        self.started = started
        # The last arrival that happened (with losses the tail of `arrivals` stays 0).
        self.finished = max([s.arrivals[s.count - 1] for s in sinks if s.count] or [started])
        self.lost = lost
        self.cpu_s = cpu_s  # CPU time of the whole process: robust against others' load

    @property
    def cpu_us_per_msg(self) -> float:
        return self.cpu_s * 1e6 / len(self.sent)

    @property
    def msgs_per_s(self) -> float:
        elapsed = self.finished - self.started
        return len(self.sent) / (elapsed / 1e9) if elapsed > 0 else 0.0

    def latencies_us(self) -> list[float]:
        """Per arrival; with losses only the messages that arrived (and then the pairing
        by position is approximate: the run reports `lost`, its figures are suspect)."""
        return [
            (sink.arrivals[i] - sent) / 1000
            for sink in self.sinks
            for i, sent in enumerate(self.sent[: sink.count])
        ] or [0.0]


def run_broker(fanout: int, count: int, rate: float | None, *, traced: bool = False) -> Run:
    tracer = None
    if traced:  # what the workbench does: a listener pushing into a bounded buffer
        tracer = Tracer()
        tracer.add_listener(deque(maxlen=10_000).append)
    broker = Broker.create(tracer=tracer)
    source = Source()
    broker.add_module("source", source)
    sinks = [Sink(count) for _ in range(fanout)]
    for index, sink in enumerate(sinks):
        broker.add_module(f"sink{index}", sink)
        broker.add_link("source", f"sink{index}")
    publish = broker.publish
    cpu = time.process_time()
    started = clock()
    sent = pace(count, rate, lambda i: publish(source, BrokerMessage(PAYLOAD)))
    deadline = time.monotonic() + SINK_WAIT_S
    for sink in sinks:
        sink.done.wait(max(deadline - time.monotonic(), 0.0))
    cpu = time.process_time() - cpu
    snapshot = broker.snapshot()
    delivered = sum(snapshot.module(f"sink{i}").delivered for i in range(fanout))
    dropped = sum(snapshot.module(f"sink{i}").dropped for i in range(fanout))
    lost = fanout * count - delivered
    if dropped:
        log(f"  broker dropped {dropped} (counted)")
    for index in range(fanout):
        broker.remove_module(f"sink{index}")
    broker.remove_module("source")
    broker.dec_ref()
    if lost:  # never expected: say so now, report it in the JSON, exit 1 at the end
        log(f"  LOST: {lost} of {fanout * count} deliveries never arrived")
    return Run(sinks, sent, started, lost, cpu)


def run_baseline(fanout: int, count: int, rate: float | None) -> Run:
    """What a hand-written worker per sink does: queue.Queue put/get, one at a time."""
    sinks = [Sink(count) for _ in range(fanout)]
    queues: list[queue.Queue[BrokerMessage | None]] = [queue.Queue() for _ in range(fanout)]

    def work(channel: queue.Queue[BrokerMessage | None], sink: Sink) -> None:
        get = channel.get
        while (item := get()) is not None:
            sink.receive(item)

    workers = [
        threading.Thread(target=work, args=(q, s), daemon=True)
        for q, s in zip(queues, sinks, strict=True)
    ]
    for worker in workers:
        worker.start()
    puts = [q.put for q in queues]

    def send(i: int) -> None:
        message = BrokerMessage(PAYLOAD)
        for put in puts:
            put(message)

    cpu = time.process_time()
    started = clock()
    sent = pace(count, rate, send)
    deadline = time.monotonic() + SINK_WAIT_S
    for sink in sinks:
        sink.done.wait(max(deadline - time.monotonic(), 0.0))
    cpu = time.process_time() - cpu
    for channel in queues:
        channel.put(None)
    for worker in workers:
        worker.join(10)
    return Run(sinks, sent, started, fanout * count - sum(s.count for s in sinks), cpu)


def wire_codec(figures: dict[str, float | int], count: int) -> None:
    message = BrokerMessage(PAYLOAD * 4, {"type": "reading", "unit": "C", "sensor": "t1"})
    started = time.perf_counter()
    for _ in range(count):
        data = encode(message)
    figures["wire_encode_per_s"] = round(count / (time.perf_counter() - started))
    started = time.perf_counter()
    for _ in range(count):
        decode(data)
    figures["wire_decode_per_s"] = round(count / (time.perf_counter() - started))
    log(
        f"wire codec ({len(data)} bytes): encode {figures['wire_encode_per_s']:,}/s, "
        f"decode {figures['wire_decode_per_s']:,}/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer messages and repeats")
    size.add_argument(
        "--smoke", action="store_true", help="a few hundred messages: checks, not figures"
    )
    options = parser.parse_args(argv)
    if options.smoke:
        repeats, full, fan_full, paced, chunk = 1, 2_000, 1_000, 400, 200
    elif options.quick:
        repeats, full, fan_full, paced, chunk = 2, 50_000, 20_000, 5_000, 1_000
    else:
        repeats, full, fan_full, paced, chunk = 3, 300_000, 100_000, 20_000, 2_000
    figures: dict[str, float | int] = {}
    lost = 0

    def throughput(name: str, fanout: int, count: int) -> None:
        nonlocal lost
        ours: list[float] = []
        base: list[float] = []
        ours_cpu: list[float] = []
        base_cpu: list[float] = []
        for r in range(repeats):
            # Alternate which goes first, so a burst of load elsewhere hits both alike.
            if r % 2:
                baseline = run_baseline(fanout, count, None)
            run = run_broker(fanout, count, None)
            lost += run.lost
            if not r % 2:
                baseline = run_baseline(fanout, count, None)
            ours.append(run.msgs_per_s)
            base.append(baseline.msgs_per_s)
            ours_cpu.append(run.cpu_us_per_msg)
            base_cpu.append(baseline.cpu_us_per_msg)
            log(
                f"{name} #{r + 1}: broker {ours[-1]:,.0f} msg/s ({ours_cpu[-1]:.2f} us CPU/msg), "
                f"queue.Queue {base[-1]:,.0f} msg/s ({base_cpu[-1]:.2f} us CPU/msg)"
            )
        figures[f"{name}_msgs_per_s"] = round(statistics.median(ours))
        figures[f"baseline_{name}_msgs_per_s"] = round(statistics.median(base))
        figures[f"{name}_ratio"] = round(statistics.median(ours) / statistics.median(base), 3)
        figures[f"{name}_cpu_us_per_msg"] = round(statistics.median(ours_cpu), 2)
        figures[f"baseline_{name}_cpu_us_per_msg"] = round(statistics.median(base_cpu), 2)

    def latency(prefix: str, fanout: int) -> None:
        """Paced runs in short chunks, broker and baseline alternating, so that a burst
        of load from other processes lands on both sides alike."""
        nonlocal lost
        ours_us: list[float] = []
        base_us: list[float] = []
        chunk_avgs: list[float] = []
        base_chunk_avgs: list[float] = []
        rates: list[float] = []
        for c in range(paced // chunk):
            if c % 2:
                base_us_chunk = run_baseline(fanout, chunk, PACED_RATE).latencies_us()
            run = run_broker(fanout, chunk, PACED_RATE)
            lost += run.lost
            if not c % 2:
                base_us_chunk = run_baseline(fanout, chunk, PACED_RATE).latencies_us()
            chunk_us = run.latencies_us()
            ours_us += chunk_us
            base_us += base_us_chunk
            chunk_avgs.append(statistics.fmean(chunk_us))
            base_chunk_avgs.append(statistics.fmean(base_us_chunk))
            rates.append(len(run.sent) / ((run.sent[-1] - run.sent[0]) / 1e9))
        rate = statistics.fmean(rates)
        log(
            f"{prefix or 'one_to_one_'}latency at {rate:,.0f} msg/s: broker avg "
            f"{statistics.fmean(ours_us):.1f} us p50 {percentile(ours_us, 0.5):.1f} "
            f"p99 {percentile(ours_us, 0.99):.1f} (chunk averages "
            f"{', '.join(f'{a:.0f}' for a in chunk_avgs)}); queue.Queue avg "
            f"{statistics.fmean(base_us):.1f} us p50 {percentile(base_us, 0.5):.1f} "
            f"p99 {percentile(base_us, 0.99):.1f}"
        )
        figures[f"{prefix}paced_rate_msgs_per_s"] = round(rate)
        figures[f"{prefix}avg_latency_us"] = round(statistics.fmean(ours_us), 1)
        figures[f"{prefix}median_chunk_avg_latency_us"] = round(statistics.median(chunk_avgs), 1)
        figures[f"{prefix}p50_latency_us"] = round(percentile(ours_us, 0.5), 1)
        figures[f"{prefix}p99_latency_us"] = round(percentile(ours_us, 0.99), 1)
        figures[f"baseline_{prefix}avg_latency_us"] = round(statistics.fmean(base_us), 1)
        figures[f"baseline_{prefix}median_chunk_avg_latency_us"] = round(
            statistics.median(base_chunk_avgs), 1
        )
        figures[f"baseline_{prefix}p50_latency_us"] = round(percentile(base_us, 0.5), 1)
        figures[f"baseline_{prefix}p99_latency_us"] = round(percentile(base_us, 0.99), 1)
        figures[f"{prefix}latency_ratio"] = round(
            statistics.fmean(ours_us) / statistics.fmean(base_us), 3
        )

    log(f"one source -> one sink, {full:,} messages x {repeats}")
    throughput("one_to_one", 1, full)
    log(f"one source -> eight sinks, {fan_full:,} messages x {repeats}")
    throughput("one_to_eight", 8, fan_full)
    figures["one_to_eight_deliveries_per_s"] = figures["one_to_eight_msgs_per_s"] * 8
    traced = [run_broker(1, full, None, traced=True) for _ in range(repeats)]
    lost += sum(r.lost for r in traced)
    figures["one_to_one_traced_msgs_per_s"] = round(statistics.median(r.msgs_per_s for r in traced))
    figures["one_to_one_traced_cpu_us_per_msg"] = round(
        statistics.median(r.cpu_us_per_msg for r in traced), 2
    )
    log(
        f"one_to_one with a trace listener: {figures['one_to_one_traced_msgs_per_s']:,} msg/s "
        f"({figures['one_to_one_traced_cpu_us_per_msg']} us CPU/msg)"
    )
    wire_codec(figures, 1_000 if options.smoke else 10_000 if options.quick else 50_000)
    log(f"latency at {PACED_RATE:,} msg/s, {paced:,} messages in chunks of {chunk:,}")
    latency("", 1)
    latency("one_to_eight_", 8)
    figures["lost"] = lost
    figures["reference_msgs_per_s"] = REFERENCE_MSGS_PER_S
    figures["one_to_one_vs_reference"] = round(
        figures["one_to_one_msgs_per_s"] / REFERENCE_MSGS_PER_S, 2
    )
    print(json.dumps(figures), flush=True)
    if lost:
        log(f"broker lost {lost} deliveries: the figures above are not valid")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
