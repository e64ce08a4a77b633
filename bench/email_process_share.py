"""N contexts in ONE process on one inbox: one shared IMAP receiver (`[mail] share =
"process"`, the default) against one receiver per context (`share = "none"`), on the
real loopback stack (Postfix + Dovecot, TLS), a publisher at 20 msg/s.

    python -m bench.email_process_share [--quick] [--sizes 1,8,32]

For each N, each mode twice in the order shared, own, own, shared (a point's place in
the run showed in its latency; the order evens it out), pooled per mode. A point: a
child process (this module with `--participant`) opens N contexts with one
subscription each on a fresh account; the publisher (in this process) sends M
messages at 20 msg/s; the child reports each context's publish -> take latency, what
each took (lost and duplicated are counted from the bodies), the bytes its distinct
receivers fetched (one for the shared mode, N without it) and its CPU time over its
life. Before the traffic, the child's CPU while nothing is sent (cores, once the
receivers settled in IDLE).

The stack, the pacing, the child processes and the CPU readings are bench.email_scale's.
The last stdout line is one JSON object: `shared_latency_p50_ms_n{N}`,
`shared_latency_p95_ms_n{N}`, `own_latency_p50_ms_n{N}`, `own_latency_p95_ms_n{N}`,
`shared_bytes_fetched_per_message_n{N}`, `own_bytes_fetched_per_message_n{N}`,
`shared_cpu_s_n{N}`, `own_cpu_s_n{N}`, `shared_idle_cores_n{N}`, `own_idle_cores_n{N}`,
`lost`, `duplicated`, `bytes_ratio_n32` (own / shared bytes at N = 32).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import mailbus
from mailbus.options import options_from_mapping
from mailbus.stacks.mailstack import MailStack

from bench.email_scale import (
    RATE_PER_S,
    Participant,
    log,
    percentile,
    process_cpu_s,
    raw_options,
    stop_participants,
    wait_all,
)

TOPIC = "share"
ENV_OPTIONS = "MAILBUS_SHARE_OPTIONS"
SHARE = {"shared": "process", "own": "none"}


def participant_main(n: int, count: int) -> int:
    """N contexts in this process: READY, then each takes until it has `count` (or STOP),
    then one JSON line with what each took and the bytes the distinct receivers fetched."""
    raw = json.loads(os.environ[ENV_OPTIONS])
    contexts = [mailbus.Context(options_from_mapping(raw, {})) for _ in range(n)]
    subs = [ctx.subscription(TOPIC, depth=count + 100) for ctx in contexts]
    for ctx in contexts:
        ctx.init()
    stop = threading.Event()
    bodies: list[list[str]] = [[] for _ in range(n)]
    latencies: list[float] = []
    lock = threading.Lock()

    def take(index: int) -> None:
        while not stop.is_set() and len(bodies[index]) < count:
            message = mailbus.wait_for_message(subs[index], 0.2)
            if message is not None:
                taken = time.time_ns()
                bodies[index].append(message.body)
                with lock:
                    latencies.append((taken - message.info.source_timestamp_ns) / 1e6)

    takers = [threading.Thread(target=take, args=(i,), daemon=True) for i in range(n)]
    for taker in takers:
        taker.start()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "STOP":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("READY", flush=True)
    for taker in takers:
        taker.join()
    # One connection's counters once, however many contexts read through it.
    receivers: dict[int, Any] = {}
    for ctx in contexts:
        receiver: Any = ctx.transport.receiver
        inner = getattr(receiver, "imap", receiver)
        receivers[id(inner)] = inner
    fetched = sum(int(r.counters.get("bytes_fetched", 0)) for r in receivers.values())
    for ctx in contexts:
        ctx.shutdown()
    result = {
        "bodies": bodies,
        "latencies_ms": latencies,
        "bytes_fetched": fetched,
        "receivers": len(receivers),
        "cpu_s": process_cpu_s(os.getpid()),
    }
    print(json.dumps(result))
    return 0


def run_point(
    stack: Any, mode: str, n: int, messages: int, idle_window_s: float = 0.0
) -> dict[str, Any]:
    user = stack.add_user()
    raw = raw_options(stack, user, "adaptive")
    raw["mail"]["share"] = SHARE[mode]
    env = {**os.environ, ENV_OPTIONS: json.dumps(raw)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.email_process_share", "--participant", f"{n},{messages}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    child = Participant(proc)
    threading.Thread(target=child.read, daemon=True).start()
    try:
        if not child.ready.wait(60 + 2 * n) or proc.poll() is not None:
            raise RuntimeError(f"{mode} N={n}: the contexts did not get ready")
        idle_cores = None
        if idle_window_s > 0:
            # Past quiet-ms (2 s) the receivers wait in IDLE: measure that steady state.
            time.sleep(3.0)
            before, started = process_cpu_s(proc.pid), time.monotonic()
            time.sleep(idle_window_s)
            idle_cores = (process_cpu_s(proc.pid) - before) / (time.monotonic() - started)
        publisher = raw_options(stack, user, "adaptive") | {"polling-period-ms": 1000.0}
        publisher["mail"]["share"] = "none"
        with mailbus.Context(options_from_mapping(publisher, {})) as ctx:
            pub = ctx.publisher(TOPIC)
            start = time.monotonic()
            for i in range(messages):
                # Pacing the publisher at RATE_PER_S (a load generator, not a wait).
                time.sleep(max(0.0, start + i / RATE_PER_S - time.monotonic()))
                pub.publish(f"m{i}")
            wait_all([child.done], 30 + messages / RATE_PER_S)
    finally:
        stop_participants([child])
    result = child.result or {"bodies": [[]] * n, "latencies_ms": [], "bytes_fetched": 0}
    lost = sum(messages - len(set(got)) for got in result["bodies"])
    duplicated = sum(len(got) - len(set(got)) for got in result["bodies"])
    lat = result["latencies_ms"] or [float("nan")]
    point = {
        "latencies": result["latencies_ms"],
        "bytes_fetched": result["bytes_fetched"],
        "messages": messages,
        "p50": round(statistics.median(lat), 1),
        "p95": round(percentile(lat, 0.95), 1),
        "bytes": round(result["bytes_fetched"] / messages, 1),
        "cpu": round(result.get("cpu_s", 0.0), 2),
        "idle_cores": None if idle_cores is None else round(idle_cores, 4),
        "lost": lost,
        "duplicated": duplicated,
    }
    log(
        f"  {mode} N={n}: p50 {point['p50']} ms p95 {point['p95']} ms, "
        f"{point['bytes']} bytes fetched/message over {result.get('receivers')} receivers, "
        f"cpu {point['cpu']} s, idle {point['idle_cores']} cores, lost {lost} dup {duplicated}"
    )
    return point


def pooled(mode: str, n: int, points: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's keys at N from its runs: latencies pooled, the rest averaged."""
    latencies = [x for p in points for x in p["latencies"]] or [float("nan")]
    idle = [p["idle_cores"] for p in points if p["idle_cores"] is not None]
    fetched = sum(p["bytes_fetched"] for p in points) / sum(p["messages"] for p in points)
    return {
        f"{mode}_latency_p50_ms_n{n}": round(statistics.median(latencies), 1),
        f"{mode}_latency_p95_ms_n{n}": round(percentile(latencies, 0.95), 1),
        f"{mode}_bytes_fetched_per_message_n{n}": round(fetched, 1),
        f"{mode}_cpu_s_n{n}": round(statistics.mean(p["cpu"] for p in points), 2),
        f"{mode}_idle_cores_n{n}": round(statistics.mean(idle), 4) if idle else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 messages instead of 200")
    parser.add_argument("--sizes", default="1,8,32", help="contexts, e.g. 1,8,32")
    parser.add_argument(
        "--order",
        default="shared,own,own,shared",
        help="the runs per N, pooled per mode (ABBA: a point's place in the run shows)",
    )
    parser.add_argument("--participant", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.participant is not None:
        n, count = (int(x) for x in args.participant.split(","))
        return participant_main(n, count)

    sizes = [int(s) for s in args.sizes.split(",")]
    messages = 100 if args.quick else 200
    idle_window_s = 3.0 if args.quick else 5.0
    result: dict[str, Any] = {"lost": 0, "duplicated": 0}
    # share = "none" needs a connection per context (and one for the publisher).
    with MailStack(max_userip_connections=max(sizes) + 20) as stack:
        # The first points of a run measured slower whichever mode they were (the
        # stack's cold start): warm up, discarded; the ABBA order evens out the rest.
        log("warm-up (discarded)")
        for mode in SHARE:
            run_point(stack, mode, 1, 50)
        for n in sizes:
            runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in SHARE}
            for mode in args.order.split(","):
                log(f"{mode}: N = {n} contexts in one process, {messages} messages")
                runs[mode].append(run_point(stack, mode, n, messages, idle_window_s))
            for mode, points in runs.items():
                if points:
                    result |= pooled(mode, n, points)
                    result["lost"] += sum(p["lost"] for p in points)
                    result["duplicated"] += sum(p["duplicated"] for p in points)
    shared32 = result.get("shared_bytes_fetched_per_message_n32")
    own32 = result.get("own_bytes_fetched_per_message_n32")
    result["bytes_ratio_n32"] = round(own32 / shared32, 2) if shared32 and own32 else None
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
