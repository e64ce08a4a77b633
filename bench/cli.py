"""What the shell tools cost and how true they are, over a real PostOffice daemon.

    python -m bench.cli [--quick] [--messages N]

echo_ratio: `mailbus topic echo --json` (a subprocess, its output piped to a file) and
a plain subscription in Python receive the same burst of messages in the same run, each
on its own mailbox of the group; the ratio of their receive rates (messages over the
time from the first publish to their last arrival). Best of alternated rounds.
hz_error_pct: `mailbus topic hz` against a publisher held to 20 Hz and to 1 kHz by
absolute deadlines; the worst relative error of its last report against the rate the
publisher really kept (from its own send times), in percent.
Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mailbus
from mailbus.options import options_from_mapping
from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.server import ServerThread
from mailbus.postoffice.store import HashParams
from mailbus.stacks.waiting import eventually

PASSWORD = "bench-cli-password-1"
BODY = '{"x": 0.5, "y": 1.25, "theta": 3.14159, "seq": %d}'


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        config = ServerConfig(
            store_path=root / "po.db", port=0, sync="normal", hash_params=HashParams(log2_n=8)
        )
        self.daemon = ServerThread(config).start()

    def table(self, box: str) -> dict[str, object]:
        return {"port": self.daemon.port, "box": box, "password": PASSWORD}

    def config(self, box: str) -> Path:
        path = self.root / f"{box}.toml"
        path.write_text(
            f'transport = "postoffice"\n[postoffice]\nport = {self.daemon.port}\n'
            f'box = "{box}"\npassword = "{PASSWORD}"\n'
        )
        return path

    def context(self, box: str) -> mailbus.Context:
        table = {"transport": "postoffice", "postoffice": self.table(box)}
        return mailbus.Context(options_from_mapping(table))

    def has_box(self, box: str) -> bool:
        return bool(self.daemon.call(lambda: box in self.daemon.office.boxes))

    def command(self, box: str, *args: str, stdout: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "mailbus", *args, "--config", str(self.config(box))],
            stdout=stdout,  # type: ignore[arg-type]
            stderr=subprocess.DEVNULL,
        )


def echo_round(bench: Bench, count: int, n: int) -> tuple[float, float]:
    """(echo rate, plain rate) in messages per second, one burst received by both."""
    out_path = bench.root / f"echo-{n}.jsonl"
    box = f"lab.echo{n}"
    with out_path.open("wb") as out:
        echo = bench.command(
            box,
            "topic",
            "echo",
            "bench/t",
            "--json",
            "--count",
            str(count),
            "--seconds",
            "120",
            stdout=out,
        )
        eventually(lambda: bench.has_box(box), 30.0, "the echo's mailbox")
        with bench.context(f"lab.plain{n}") as plain, bench.context(f"lab.pub{n}") as pub:
            subscription = plain.subscription("bench/t", depth=count)
            publisher = pub.publisher("bench/t")
            started_ns = time.time_ns()
            for i in range(count):
                publisher.publish(BODY % i)
            last_plain_ns = 0
            for _ in range(count):
                message = mailbus.wait_for_message(subscription, 60.0)
                if message is None:
                    break
                last_plain_ns = message.info.reception_timestamp_ns
        echo.wait(120)
    lines = [json.loads(line) for line in out_path.read_text().splitlines() if line]
    last_echo_ns = max((int(line["reception_timestamp_ns"]) for line in lines), default=0)
    echo_rate = len(lines) / max((last_echo_ns - started_ns) / 1e9, 1e-9) if lines else 0.0
    plain_rate = count / max((last_plain_ns - started_ns) / 1e9, 1e-9)
    return echo_rate, plain_rate


def hz_error(bench: Bench, hz: float, seconds: float, n: int) -> tuple[float, float, float]:
    """(reported rate, the publisher's kept rate, error in percent)."""
    box = f"lab.hz{n}"
    window = int(hz * seconds)
    hz_cmd = bench.command(
        box,
        "topic",
        "hz",
        "bench/rate",
        "--json",
        "--window",
        str(window),
        "--seconds",
        str(seconds + 3.0),
        stdout=subprocess.PIPE,
    )
    eventually(lambda: bench.has_box(box), 30.0, "the hz command's mailbox")
    sent: list[float] = []
    with bench.context(f"lab.ratepub{n}") as pub:
        publisher = pub.publisher("bench/rate")
        start = time.perf_counter() + 0.2
        for i in range(window):
            # The publisher's own schedule (absolute deadlines), not a synchronisation.
            time.sleep(max(0.0, start + i / hz - time.perf_counter()))
            sent.append(time.perf_counter())
            publisher.publish(BODY % i)
        out, _ = hz_cmd.communicate(timeout=seconds + 60)
    reports = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    reported = float(reports[-1]["rate_hz"]) if reports else 0.0
    kept = (len(sent) - 1) / (sent[-1] - sent[0])
    return reported, kept, abs(reported - kept) / kept * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--messages", type=int, default=None)
    args = parser.parse_args()
    count = args.messages or (1000 if args.quick else 5000)
    rounds = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        bench = Bench(Path(tmp))
        try:
            ratios = []
            for n in range(rounds):
                echo_rate, plain_rate = echo_round(bench, count, n)
                ratios.append(echo_rate / plain_rate)
                print(
                    f"round {n}: echo {echo_rate:,.0f} msg/s, plain {plain_rate:,.0f} msg/s, "
                    f"ratio {ratios[-1]:.3f}",
                    flush=True,
                )
            errors = {}
            for n, (hz, seconds) in enumerate(((20.0, 3.0), (1000.0, 2.0))):
                reported, kept, error = hz_error(bench, hz, seconds, n)
                errors[hz] = error
                print(
                    f"hz at {hz:g}: reported {reported:.3f}, kept {kept:.3f}, error {error:.3f} %",
                    flush=True,
                )
        finally:
            bench.daemon.stop()
    print(
        json.dumps(
            {
                "echo_ratio": round(max(ratios), 3),
                "echo_ratio_rounds": [round(r, 3) for r in ratios],
                "messages": count,
                "hz_error_pct": round(max(errors.values()), 3),
                "hz_error_pct_20": round(errors[20.0], 3),
                "hz_error_pct_1000": round(errors[1000.0], 3),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
