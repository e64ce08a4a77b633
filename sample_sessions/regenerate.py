"""Regenerate the sample sessions: `python sample_sessions/regenerate.py [--seconds S]`.

- demo/          the demo system (mailbus.demo.DemoSystem) for a few seconds
- slow_service/  the demo plus `slow/lookup`, a service that answers late, twice, or
                 never (orphans), called with a short timeout
- gaps/          publishers behind a lossy link that drops and reorders emails, so that
                 the sequence analysis finds gaps and reordering

Timing is real, so each run gives other numbers; the shape (topics, services, orphans,
gaps) is the same. Sessions are written next to this script, replacing the old ones.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import threading
import time
from pathlib import Path

import mailbus
from mailbus.demo import DemoSystem
from mailbus.email_message import Email
from mailbus.errors import ServiceTimeoutError
from mailbus.inprocess import in_process_transport
from mailbus.sessions.recorder import Recorder
from mailbus.transport import EmailSender, Transport
from mailbus.waitset import wait_for_request

HERE = Path(__file__).resolve().parent


def _fresh(name: str) -> Path:
    path = HERE / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def demo(seconds: float) -> None:
    with mailbus.Context() as ctx:
        recorder = Recorder(_fresh("demo"), context=ctx, participant="demo@localhost")
        system = DemoSystem(ctx, seed=1)
        system.start()
        stop = threading.Event()
        stop.wait(seconds)  # let the demo run: the recording's length
        system.stop()
        recorder.stop()


def slow_service(seconds: float) -> None:
    rng = random.Random(2)
    stop = threading.Event()
    with mailbus.Context() as ctx:
        recorder = Recorder(_fresh("slow_service"), context=ctx, participant="slow@localhost")
        system = DemoSystem(ctx, seed=2)
        system.start()
        server = ctx.server("slow/lookup")
        client = ctx.client("slow/lookup")

        def serve() -> None:
            while not stop.is_set():
                request = wait_for_request(server, 0.1)
                if request is None:
                    continue
                roll = rng.random()
                if roll < 0.2:
                    continue  # never answered: an orphan
                if roll < 0.35:
                    stop.wait(0.35)  # after the client's 0.2 s timeout: late
                elif roll < 0.45:
                    server.send_response(request, json.dumps({"again": True}))  # duplicate
                else:
                    stop.wait(rng.uniform(0.0, 0.08))
                if ctx.is_initialized:
                    server.send_response(request, json.dumps({"key": request.body, "v": 1}))

        def call() -> None:
            n = 0
            while not stop.wait(0.05):
                n += 1
                try:
                    client.call(json.dumps({"key": f"k{n % 7}"}), timeout=0.2)
                except ServiceTimeoutError:
                    pass

        threads = [threading.Thread(target=f, daemon=True) for f in (serve, call)]
        for t in threads:
            t.start()
        stop.wait(seconds)
        stop.set()
        for t in threads:
            t.join(2.0)
        time.sleep(0.5)  # let late answers arrive before the recording ends
        system.stop()
        recorder.stop()


class LossySender(EmailSender):
    """Drops about 1 in 12 emails and swaps about 1 in 10 with the next one."""

    def __init__(self, inner: EmailSender, seed: int) -> None:
        self.inner = inner
        self.random = random.Random(seed)
        self.held: Email | None = None
        self.lock = threading.Lock()

    def send(self, email: Email) -> None:
        with self.lock:
            roll = self.random.random()
            if roll < 0.08:
                return
            if roll < 0.18 and self.held is None:
                self.held = email
                return
            self.inner.send(email)
            if self.held is not None:
                self.inner.send(self.held)
                self.held = None


def gaps(seconds: float) -> None:
    inner = in_process_transport()
    transport = Transport(LossySender(inner.sender, seed=3), inner.receiver, name="lossy")
    with mailbus.Context(transport=transport) as ctx:
        recorder = Recorder(
            _fresh("gaps"), context=ctx, participant="gaps@localhost", transport="lossy"
        )
        publishers = [ctx.publisher(t) for t in ("sensors/lidar", "sensors/imu", "robot/state")]
        stop = threading.Event()
        n = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            n += 1
            for i, publisher in enumerate(publishers):
                if n % (i + 1) == 0:
                    publisher.publish(json.dumps({"n": n}))
            stop.wait(0.02)  # about 50 Hz: the sample's pace
        recorder.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    for make in (demo, slow_service, gaps):
        make(args.seconds)
        print(f"wrote {HERE / make.__name__}")


if __name__ == "__main__":
    main()
