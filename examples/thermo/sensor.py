"""A temperature sensor: publishes a reading on `sensors/temp` ten times a second.

Readings follow a fixed pattern (no randomness), so that a recording of it is the same
every time. Run it alone with `python sensor.py` (options from MAILBUS_CONFIG_FILE, as
every Mailbus program), or let a test start it (`system.start("sensor.py")`): a test on
the in-process bus calls `run` with its own context.
"""

from __future__ import annotations

import json
import signal
import threading

import mailbus

TOPIC = "sensors/temp"
PERIOD_S = 0.1
PATTERN = [20.0, 21.5, 23.0, 24.5, 26.0, 27.5, 29.0, 30.5]


def reading(n: int) -> str:
    return json.dumps({"sensor": "s1", "seq": n, "celsius": PATTERN[n % len(PATTERN)]})


def run(context: mailbus.Context, stop: threading.Event) -> None:
    publisher = context.publisher(TOPIC)
    n = 0
    while not stop.wait(PERIOD_S):
        publisher.publish(reading(n))
        n += 1


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with mailbus.Context() as context:
        run(context, stop)


if __name__ == "__main__":
    main()
