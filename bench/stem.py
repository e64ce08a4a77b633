"""Stem dispatch cost: command/response round trips between two cells of one hub, beside
the engine's own service call round trip (`ServiceClient.call`), in the same run.

    python -m bench.stem [--quick]

Both round trips cross threads the same way: the caller's thread hands a request to
another thread (the hub's loop; the server's thread) and blocks until the answer comes
back. `overhead_ratio` is the time of a Stem round trip over the engine's, the median of
the per-round ratios (target: at most 1.5). Also measured: the same command between two
cells inside the hub's loop (no thread crossing: the dispatch alone), and across a
portal between two hubs on one in-process context. Rounds alternate so that machine
noise hits each side alike.

Last stdout line: one JSON object (keys in shared/BENCH.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from typing import Any

import mailbus
from mailbus.stem import Cell, Hub, StemMessage

from bench.intraprocess import echo_service


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Echo(Cell):
    def echo_cmd(self, message: StemMessage) -> Any:
        return message.data


class Pinger(Cell):
    """Sends the next command when the response to the last one arrives."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = threading.Event()

    def start_in(self, message: StemMessage) -> None:
        self.send("echo", cmd="echo", data="ping")

    def response_in(self, message: StemMessage) -> None:
        self.left -= 1
        if self.left:
            self.send("echo", cmd="echo", data="ping")
        else:
            self.done.set()


def engine_round_trips(count: int) -> float:
    with mailbus.Context() as ctx, echo_service(ctx):
        client = ctx.client("bench/echo")
        client.call("warm", timeout=5.0)
        started = time.perf_counter()
        for _ in range(count):
            client.call("ping", timeout=5.0)
        return count / (time.perf_counter() - started)


def hub_round_trips(count: int) -> float:
    with Hub("bench") as hub:
        hub.register_cell(Echo(), "echo")
        hub.call("echo", "echo", "warm", timeout=5.0)
        started = time.perf_counter()
        for _ in range(count):
            hub.call("echo", "echo", "ping", timeout=5.0)
        return count / (time.perf_counter() - started)


def in_loop_round_trips(count: int) -> float:
    with Hub("bench") as hub:
        hub.register_cell(Echo(), "echo")
        pinger = Pinger(count)
        hub.register_cell(pinger, "pinger")
        started = time.perf_counter()
        hub.send(to="pinger", from_="bench", type="start")
        if not pinger.done.wait(60):
            raise RuntimeError("ping-pong did not finish")
        return count / (time.perf_counter() - started)


def portal_round_trips(count: int) -> float:
    with mailbus.Context() as ctx:
        a, b = Hub("A"), Hub("B")
        b.register_cell(Echo(), "echo")
        b.listen(ctx)
        a.connect(ctx, "B")
        with a, b:
            a.call("B:echo", "echo", "warm", timeout=5.0)
            started = time.perf_counter()
            for _ in range(count):
                a.call("B:echo", "echo", "ping", timeout=5.0)
            return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 1_000 if args.quick else 2_000
    rounds = 5 if args.quick else 15
    results: dict[str, list[float]] = {"engine": [], "hub": [], "loop": [], "portal": []}
    for r in range(rounds):
        for name, run, size in (
            ("engine", engine_round_trips, n),
            ("hub", hub_round_trips, n),
            ("loop", in_loop_round_trips, n * 5),
            ("portal", portal_round_trips, n // 4),
        ):
            rate = run(size)
            results[name].append(rate)
            log(f"round {r + 1}/{rounds}  {name:7} {rate:10.0f} round trips/s")
    med = {name: statistics.median(rates) for name, rates in results.items()}
    # Each round's engine and Stem runs follow each other: their ratio sees the same
    # load, so the median of the per-round ratios is the steadiest comparison.
    ratios = [e / h for e, h in zip(results["engine"], results["hub"], strict=True)]
    figures = {
        "round_trips_per_s": round(med["hub"], 1),
        "engine_round_trips_per_s": round(med["engine"], 1),
        "overhead_ratio": round(statistics.median(ratios), 3),
        "overhead_ratio_of_medians": round(med["engine"] / med["hub"], 3),
        "in_loop_round_trips_per_s": round(med["loop"], 1),
        "in_loop_rtt_us": round(1e6 / med["loop"], 2),
        "portal_round_trips_per_s": round(med["portal"], 1),
        "portal_ratio_vs_engine": round(med["engine"] / med["portal"], 3),
        "target_overhead_ratio_max": 1.5,
        "rounds": rounds,
        "calls_per_round": n,
    }
    log(
        f"stem {med['hub']:.0f}/s vs engine {med['engine']:.0f}/s: "
        f"overhead ratio {figures['overhead_ratio']} (target <= 1.5)"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
