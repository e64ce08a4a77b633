"""A small live system in one process, for `mailbus demo` and the workbench's default.

Topics at different rates (one with JSON bodies, one bursty), a service that answers
(sometimes slowly) and a client calling it.

This file is also a participant a test can start (`system.start(path_of_this_file,
ready=[...])`, see docs/testing-your-system.md): on the in-process bus the kit calls
`run(context, stop)` with the test's context; on another transport it runs the file as
a process, which reads its options from MAILBUS_CONFIG_FILE and its name from
MAILBUS_NAME as every Mailbus program does. As a participant the demo leaves out its own
client of `demo/add`: the test is the caller, and its checks see only its own calls.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from mailbus.context import Context
from mailbus.errors import ServiceTimeoutError
from mailbus.service import ServiceServer

SERVICE = "demo/add"
TOPICS = ("sensors/temperature", "robot/pose", "robot/log", "system/heartbeat")


class DemoSystem:
    """Runs the demo's publishers, server and client on threads of one context."""

    def __init__(
        self,
        context: Context,
        *,
        speed: float = 1.0,
        seed: int | None = None,
        client: bool = True,
    ) -> None:
        self.context = context
        self.client = client  # False: no caller of demo/add (a test calls it)
        self.speed = speed
        self.calls = 0
        self.timeouts = 0
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        loops: list[tuple[str, Callable[[], None]]] = [
            ("demo-temperature", self._temperature),
            ("demo-pose", self._pose),
            ("demo-log", self._log_bursts),
            ("demo-heartbeat", self._heartbeat),
            ("demo-server", self._serve),
        ]
        if self.client:
            loops.append(("demo-client", self._call))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(2.0)

    def _every(self, period: float) -> bool:
        """Wait one period; False once the demo stops."""
        return not self._stop.wait(period / self.speed)

    def _temperature(self) -> None:
        publisher = self.context.publisher("sensors/temperature")
        t = 0.0
        while self._every(0.1):
            t += 0.1
            reading = {"celsius": round(21 + 2 * math.sin(t / 5) + self._random.gauss(0, 0.1), 3)}
            publisher.publish(json.dumps({"sensor": "t1", **reading, "t": round(t, 1)}))

    def _pose(self) -> None:
        publisher = self.context.publisher("robot/pose")
        t = 0.0
        while self._every(0.05):
            t += 0.05
            pose: dict[str, Any] = {
                "x": round(math.cos(t), 4),
                "y": round(math.sin(t), 4),
                "theta": round(t % (2 * math.pi), 4),
            }
            publisher.publish(json.dumps(pose))

    def _log_bursts(self) -> None:
        publisher = self.context.publisher("robot/log")
        levels = ("INFO", "INFO", "INFO", "WARN", "ERROR")
        n = 0
        while self._every(self._random.uniform(0.5, 2.0)):
            for _ in range(self._random.randint(3, 15)):
                n += 1
                publisher.publish(f"{self._random.choice(levels)} event {n}")

    def _heartbeat(self) -> None:
        publisher = self.context.publisher("system/heartbeat")
        n = 0
        while self._every(1.0):
            n += 1
            publisher.publish(f"alive {n}")

    def _serve(self) -> None:
        server = self.context.server(SERVICE)
        # A named wait set of the context, so that the workbench's wait-set view has one.
        wait_set = self.context.wait_set("demo/server")
        wait_set.add_server(server)
        try:
            while not self._stop.is_set():
                if wait_set.wait(0.2):
                    self._answer(server)
        finally:
            wait_set.close()

    def _answer(self, server: ServiceServer) -> None:
        while (request := server.take_request()) is not None:
            if self._random.random() < 0.1:  # now and then a slow answer
                self._stop.wait(self._random.uniform(0.2, 0.6))
            try:
                numbers = json.loads(request.body)
                body = json.dumps({"sum": sum(numbers)})
            except (ValueError, TypeError):
                body = json.dumps({"error": "expected a JSON list of numbers"})
            if self.context.is_initialized:
                server.send_response(request, body)

    def _call(self) -> None:
        client = self.context.client(SERVICE)
        while self._every(0.5):
            numbers = [self._random.randint(0, 99) for _ in range(3)]
            try:
                client.call(json.dumps(numbers), timeout=0.5)
                self.calls += 1
            except ServiceTimeoutError:
                self.timeouts += 1


def _run(args: argparse.Namespace) -> int:
    from mailbus.options import load_options

    options = load_options(args.config)
    with Context(options) as context:
        demo = DemoSystem(context)
        demo.start()
        started = time.monotonic()
        try:
            while args.seconds is None or time.monotonic() - started < args.seconds:
                time.sleep(1.0)  # the summary's own pace, not synchronisation
                c = context.counters
                print(
                    f"{time.monotonic() - started:6.1f}s  received {c['received']:>7}  "
                    f"calls {demo.calls:>5}  timeouts {demo.timeouts:>3}  "
                    f"overflowed {c['overflowed']:>3}  skipped {c['malformed'] + c['foreign']:>3}",
                    flush=True,
                )
        except KeyboardInterrupt:
            pass
        finally:
            demo.stop()
    return 0


def run(context: Context, stop: threading.Event) -> None:
    """The demo's publishers and its server on `context` until `stop` is set (the
    participant a test starts; no client of its own)."""
    demo = DemoSystem(context, client=False)
    demo.start()
    try:
        stop.wait()
    finally:
        demo.stop()


def main() -> None:
    """This file run as a process: options from MAILBUS_CONFIG_FILE and MAILBUS_*,
    stopped by SIGTERM or SIGINT."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with Context() as context:
        run(context, stop)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("demo", help="run the demo system headless and print a summary")
    parser.add_argument("--seconds", type=float, default=None, help="stop after N seconds")
    parser.set_defaults(handler=_run)


if __name__ == "__main__":
    main()
