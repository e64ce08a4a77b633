"""What the testing kit costs: armed expectations against a plain subscription, and a
golden run against the replay alone, each pair in the same run (best of three rounds,
alternated: the machine is shared).

    python -m bench.testing [--quick] [--messages N] [--events N]

expect_throughput_ratio: messages/s published in-process and seen by ten expectations
armed on one topic, over messages/s published and taken by one plain subscription.
golden_ratio_to_replay: seconds of `golden.check` over a session of `--events` events
(half inputs replayed into an in-process echo participant, half its recorded outputs),
over seconds of replaying the same inputs into the same participant alone.
Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mailbus.context import Context
from mailbus.sessions.player import Player
from mailbus.sessions.recorder import Recorder
from mailbus.testing.buses import inprocess_bus
from mailbus.testing.expect import Expect
from mailbus.testing.golden_run import Golden
from mailbus.waitset import wait_for_message

BODY = '{"x": 0.5, "y": 1.25, "theta": 3.14159, "seq": %d}'


def plain_rate(count: int) -> float:
    bus = inprocess_bus()
    try:
        subscription = bus.subscription("bench/t")
        publisher = bus.publisher("bench/t")
        started = time.perf_counter()
        for i in range(count):
            publisher.publish(BODY % i)
            if i % 100 == 99:  # a reader keeps up, as a test's would
                while subscription.take() is not None:
                    pass
        while subscription.take() is not None:
            pass
        return count / (time.perf_counter() - started)
    finally:
        bus.close()


def expect_rate(count: int, armed: int = 10) -> float:
    bus = inprocess_bus()
    try:
        expect = Expect(bus)
        expectations = [expect.topic("bench/t", count=count, within=600) for _ in range(armed)]
        publisher = bus.publisher("bench/t")
        started = time.perf_counter()
        for i in range(count):
            publisher.publish(BODY % i)
        for expectation in expectations:
            expectation.wait()
        elapsed = time.perf_counter() - started
        expect.close()
        return count / elapsed
    finally:
        bus.close()


def start_echo(context: Context, stop: threading.Event) -> threading.Thread:
    """The system under test of the golden run: every input echoed as an output. It
    subscribes before it returns, so that no input is sent before it listens."""
    subscription = context.subscription("in/x", depth=1_000_000)
    out = context.publisher("out/x")

    def run() -> None:
        while not stop.is_set():
            message = wait_for_message(subscription, 0.05)
            if message is not None:
                out.publish(message.body)

    worker = threading.Thread(target=run)
    worker.start()
    return worker


def make_session(directory: Path, events: int) -> None:
    stop = threading.Event()
    with (
        Context() as context,
        Recorder(
            str(directory),
            context=context,
            kinds={"message.published"},
            max_queued=events + 10,
        ),
    ):
        worker = start_echo(context, stop)
        outputs = context.subscription("out/x", depth=events)
        publisher = context.publisher("in/x")
        for i in range(events // 2):
            publisher.publish(BODY % i)
        seen = 0
        while seen < events // 2 and wait_for_message(outputs, 30) is not None:
            seen += 1
        stop.set()
        worker.join(10)


def with_echo(run: Callable[[Any], None]) -> float:
    bus = inprocess_bus()
    stop = threading.Event()
    worker = start_echo(bus.context, stop)
    try:
        started = time.perf_counter()
        run(bus)
        return time.perf_counter() - started
    finally:
        stop.set()
        worker.join(10)
        bus.close()


def replay_alone(session: Path, events: int) -> float:
    def run(bus: Any) -> None:
        # The outputs are taken, as a test that replays without a golden check would.
        seen = 0
        sink = bus.context.subscription("out/x", depth=events)
        Player(str(session), bus.context, exclude="^out/x$", rate=1e9).run()
        while seen < events // 2 and wait_for_message(sink, 30) is not None:
            seen += 1

    return with_echo(run)


def golden_run(session: Path, golden_file: Path, update: bool = False) -> float:
    def run(bus: Any) -> None:
        golden = Golden(bus, None, update, golden_file)
        golden.check(session, outputs=["out/x"], rate=1e9, within=120, settle=0.05)

    return with_echo(run)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--messages", type=int)
    parser.add_argument("--events", type=int)
    args = parser.parse_args()
    messages = args.messages or (20_000 if args.quick else 100_000)
    events = args.events or (20_000 if args.quick else 100_000)
    best: dict[str, float] = {}
    for round_ in range(5):  # short rounds, alternated; the best of each
        plain, armed = plain_rate(messages), expect_rate(messages)
        print(f"round {round_}: plain {plain:,.0f} msg/s, ten expectations {armed:,.0f} msg/s")
        best["plain"] = max(best.get("plain", 0), plain)
        best["armed"] = max(best.get("armed", 0), armed)
    root = Path(tempfile.mkdtemp(prefix="bench-testing-"))
    try:
        session = root / "session"
        print(f"recording a session of {events} events", flush=True)
        make_session(session, events)
        # The golden file is this system's output, as after a first --mailbus-update.
        golden_run(session, root / "g.json", update=True)
        for round_ in range(3):
            alone, checked = replay_alone(session, events), golden_run(session, root / "g.json")
            print(f"round {round_}: replay alone {alone:.2f} s, golden run {checked:.2f} s")
            best["alone"] = min(best.get("alone", 1e9), alone)
            best["golden"] = min(best.get("golden", 1e9), checked)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {
        "messages": messages,
        "events": events,
        "plain_subscription_msgs_per_s": round(best["plain"]),
        "ten_expectations_msgs_per_s": round(best["armed"]),
        "expect_throughput_ratio": round(best["armed"] / best["plain"], 3),
        "replay_alone_s": round(best["alone"], 3),
        "golden_run_s": round(best["golden"], 3),
        "golden_ratio_to_replay": round(best["golden"] / best["alone"], 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
