"""The shell tools over a real PostOffice daemon, against a plain subscription in the
same run.

echo_ratio: a publisher sends 10,000 messages (3,000 with --quick) as fast as the
daemon takes them;
`mailbus topic echo --json` (a subprocess, its stdout a file) and a plain
`ctx.subscription` (a process of its own, writing each body to a file) both listen. The
ratio is the lines the echo wrote over the messages the subscription took, both counted
after the same bounded drain.

hz_error_pct: a publisher paced on an absolute schedule (so its long-run rate is the
nominal one) at 20 Hz and 1 kHz; `mailbus topic hz --json` reports, and its last report
is compared with the rate the publisher actually achieved (messages over its own send
times). The worst of the two is the figure.

Run: python -m bench.cli [--quick]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mailbus
from mailbus.errors import TransportError
from mailbus.options import options_from_mapping
from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.server import ServerThread
from mailbus.postoffice.store import HashParams
from mailbus.trace import Tracer

PASSWORD = "bench-letter-K3y-long"
MAILBUS = [sys.executable, "-m", "mailbus"]
SETTLE_S = 30.0
DRAIN_S = 90.0  # for both listeners to take every message


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Daemon:
    def __init__(self, root: Path) -> None:
        config = ServerConfig(
            store_path=root / "store" / "postoffice.db",
            port=0,
            sync="normal",
            hash_params=HashParams(log2_n=8, r=8, p=1),
            auth_delay_s=0.01,
            auth_delay_max_s=0.05,
            max_letters_per_box=1_000_000,
        )
        self.root = root
        self.thread = ServerThread(config, Tracer()).start()

    def config(self, box: str) -> Path:
        path = self.root / f"{box}.toml"
        path.write_text(
            'transport = "postoffice"\n[postoffice]\n'
            f'port = {self.thread.port}\nbox = "{box}"\npassword = "{PASSWORD}"\n'
        )
        return path

    def options(self, box: str) -> mailbus.Options:
        table = {"port": self.thread.port, "box": box, "password": PASSWORD}
        return options_from_mapping({"transport": "postoffice", "postoffice": table})

    def wait_for_box(self, box: str) -> None:
        """Until `box`, or the box of its own a shell command on `box`'s options makes
        (`<box>sh<pid>x<random>`), exists."""
        own = re.compile(re.escape(box) + r"(sh[0-9]+x[0-9a-f]+)?")
        deadline = time.monotonic() + SETTLE_S
        while not self.thread.call(lambda: any(map(own.fullmatch, self.thread.office.boxes))):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{box} never connected")
            time.sleep(0.05)

    def stop(self) -> None:
        self.thread.stop()


# The baseline: a plain subscription in a process of its own (as the echo is), writing
# each body to a file as it takes it.
PLAIN = """
import sys, mailbus
from mailbus.options import options_from_mapping
port, box, password, path = sys.argv[1:]
table = {"port": int(port), "box": box, "password": password}
options = options_from_mapping({"transport": "postoffice", "postoffice": table})
with mailbus.Context(options) as ctx, open(path, "w") as out:
    subscription = ctx.subscription("bench/echo")
    while True:
        message = mailbus.wait_for_message(subscription, 1.0)
        if message is not None:
            out.write(message.body + "\\n")
            out.flush()
"""


def echo_ratio(daemon: Daemon, count: int) -> dict[str, Any]:
    echo_path = daemon.root / "echo.jsonl"
    plain_path = daemon.root / "plain.txt"
    config = str(daemon.config("bench.echo"))
    with echo_path.open("w") as out:
        echo = subprocess.Popen(
            [*MAILBUS, "topic", "echo", "bench/echo", "--json", "--config", config],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    port = str(daemon.thread.port)
    plain = subprocess.Popen(
        [sys.executable, "-c", PLAIN, port, "bench.plain", PASSWORD, str(plain_path)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        daemon.wait_for_box("bench.echo")
        daemon.wait_for_box("bench.plain")
        with mailbus.Context(daemon.options("bench.pub")) as pub_ctx:
            publisher = pub_ctx.publisher("bench/echo")
            sent = 0
            started = time.monotonic()
            while sent < count:
                try:
                    publisher.publish(json.dumps({"n": sent, "celsius": 20.5}))
                except TransportError:  # the daemon's backlog is full: let it catch up
                    time.sleep(0.01)
                    continue
                sent += 1
            publish_s = time.monotonic() - started
            log(f"  published {sent} in {publish_s:.1f} s ({sent / publish_s:.0f}/s)")
        done_s: dict[Path, float] = {}
        deadline = time.monotonic() + DRAIN_S
        while len(done_s) < 2 and time.monotonic() < deadline:
            for path in (echo_path, plain_path):
                if path not in done_s and _lines(path) >= sent:
                    done_s[path] = time.monotonic() - started
            time.sleep(0.05)
        echoed, took = _lines(echo_path), _lines(plain_path)
        ended_s = time.monotonic() - started
    finally:
        for process in (echo, plain):
            process.terminate()
            process.communicate(timeout=SETTLE_S)
    log(f"  plain subscription took {took}; echo wrote {echoed} (of {sent})")
    return {
        "echo_ratio": round(echoed / took, 4) if took else None,
        "echo_published": sent,
        "echo_lines": echoed,
        "plain_received": took,
        "plain_msgs_per_s": round(took / done_s.get(plain_path, ended_s), 1),
        "echo_msgs_per_s": round(echoed / done_s.get(echo_path, ended_s), 1),
    }


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if line.endswith(b"\n"))


def hz_error(daemon: Daemon, rate: float, seconds: float) -> dict[str, Any]:
    box = f"bench.hz{int(rate)}"
    topic = f"bench/hz{int(rate)}"
    window = max(10, int(rate * seconds) - 2)
    until = ["--seconds", str(seconds + 6)]
    config = ["--config", str(daemon.config(box))]
    hz = subprocess.Popen(
        [*MAILBUS, "topic", "hz", topic, "--json", "--window", str(window), *until, *config],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    daemon.wait_for_box(box)
    period = 1.0 / rate
    # In the hz box's group ("bench"), not under it: the command reads through a box of
    # its own there (docs/shell.md), not through `box` itself.
    with mailbus.Context(daemon.options(f"{box}pub")) as ctx:
        publisher = ctx.publisher(topic)
        count = int(rate * seconds)
        sent_ns: list[int] = []
        start = time.monotonic()
        for i in range(count):
            pause = start + i * period - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            sent_ns.append(time.time_ns())
            publisher.publish('{"v": 1}')
    true_hz = (len(sent_ns) - 1) / ((sent_ns[-1] - sent_ns[0]) / 1e9)
    out, err = hz.communicate(timeout=seconds + SETTLE_S)
    reports = [json.loads(line) for line in out.splitlines() if line.strip()]
    if not reports:
        raise RuntimeError(f"topic hz reported nothing: {err}")
    measured = float(reports[-1]["rate_hz"])
    error = abs(measured - true_hz) / true_hz * 100
    log(
        f"  {rate:g} Hz nominal: publisher achieved {true_hz:.3f} Hz, "
        f"topic hz said {measured:.3f} Hz over {reports[-1]['window']} ({error:.3f}%)"
    )
    return {
        f"hz_true_{int(rate)}": round(true_hz, 3),
        f"hz_reported_{int(rate)}": round(measured, 3),
        f"hz_error_pct_{int(rate)}": round(error, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(Path(tmp))
        try:
            log("echo --json to a file against a plain subscription")
            figures.update(echo_ratio(daemon, 3_000 if quick else 10_000))
            for rate in (20.0, 1000.0):
                log(f"topic hz at {rate:g} Hz")
                figures.update(hz_error(daemon, rate, 3.0 if quick else 6.0))
        finally:
            daemon.stop()
    figures["hz_error_pct"] = max(figures["hz_error_pct_20"], figures["hz_error_pct_1000"])
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
