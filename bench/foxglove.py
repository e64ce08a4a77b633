"""`mailbus foxglove` under load: an in-process system whose publisher is paced at a
rate, a plain subscription in the same context (the baseline), and one Foxglove client
in a process of its own (websockets, our codec) subscribed to the same topic.

client_ratio: messages per second the Foxglove client received over those the plain
subscription took, over the same paced run at 10,000 msg/s (3 s; 1 s with --quick).

added_latency_p50_ms: the client's median latency (its receive time less the time the
publisher stamped in the body) less the plain subscription's, at 1,000 msg/s (where
latency is not queueing).

system_ratio: the system's throughput as it is deployed, in processes of its own on a
PostOffice daemon (a publisher as fast as the daemon takes letters, a plain subscriber
in another process, from the first letter sent to the last one taken), with
`mailbus foxglove` running (a process of its own, as `--config` runs it) and a client
subscribed, over the same with no client connected; rounds alternate the three
configurations, medians compared. Beside it: `system_ratio_to_no_bridge` (a client
against no bridge at all: what one more participant receiving everything costs on
this machine's two cores) and `system_ratio_inprocess` (the bridge in the publisher's
interpreter, as `--demo` and the notebook run it, against no bridge).

    python -m bench.foxglove [--quick]   (--quick: shorter runs, one round of each)

Last stdout line: one JSON object (keys in shared/BENCH.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import mailbus
from mailbus.errors import TransportError
from mailbus.foxglove.server import FoxgloveServer
from mailbus.options import Options, options_from_mapping

TOPIC = "bench/foxglove"
READY_S = 30.0
DRAIN_S = 60.0

# The Foxglove client: subscribes to TOPIC, prints `ready` at its first message, then
# counts the numbered ones (seq >= 0) and prints what it saw once it has `expected`, or
# when nothing came for 10 s.
CLIENT = """
import json, sys, time
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from mailbus.foxglove import protocol as P
url, topic, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
latencies, received, first, last = [], 0, None, None
with connect(url, subprotocols=["foxglove.websocket.v1"], compression=None,
             max_size=None) as ws:
    ready = False
    while received < expected:
        try:
            frame = ws.recv(timeout=10)
        except (TimeoutError, ConnectionClosed):  # cut off when too slow: say what came
            break
        now = time.time_ns()
        if isinstance(frame, str):
            message = P.decode_server_text(frame)
            if isinstance(message, P.Advertise):
                for channel in message.channels:
                    if channel.topic == topic:
                        ws.send(P.encode_client(P.Subscribe(((1, channel.id),))))
            continue
        body = json.loads(frame[13:])
        if not ready:
            ready = True
            print("ready", flush=True)
        if body["seq"] < 0:
            continue
        received += 1
        first = now if first is None else first
        last = now
        latencies.append((now - body["t"]) / 1e6)
print(json.dumps({"received": received, "first_ns": first, "last_ns": last,
                  "latency_p50_ms": sorted(latencies)[len(latencies) // 2] if latencies else None}),
      flush=True)
"""


# The system's plain subscriber, in a process of its own: prints `ready`, then, once it
# has taken `expected` numbered messages, the time it took the last one.
PLAIN = """
import json, sys, time, mailbus
from mailbus.options import options_from_mapping
port, box, password, topic, expected = sys.argv[1:]
table = {"port": int(port), "box": box, "password": password}
with mailbus.Context(options_from_mapping({"transport": "postoffice", "postoffice": table})) as ctx:
    subscription = ctx.subscription(topic, depth=1_000_000)
    print("ready", flush=True)
    received = 0
    while received < int(expected):
        message = mailbus.wait_for_message(subscription, 30.0)
        if message is None:
            break
        if json.loads(message.body)["seq"] >= 0:
            received += 1
    print(json.dumps({"received": received, "last": time.time()}), flush=True)
"""
PASSWORD = "bench-foxglove-K3y-long"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Taker:
    """The plain subscription: a thread taking every message, noting when."""

    def __init__(self, ctx: mailbus.Context) -> None:
        self.subscription = ctx.subscription(TOPIC, depth=2_000_000)
        self.received = 0
        self.first = self.last = 0
        self.latencies_ms: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            message = mailbus.wait_for_message(self.subscription, 0.2)
            if message is None:
                continue
            now = time.time_ns()
            body = json.loads(message.body)
            if body["seq"] < 0:
                continue
            self.received += 1
            self.first = self.first or now
            self.last = now
            self.latencies_ms.append((now - body["t"]) / 1e6)

    def wait_for(self, count: int) -> bool:
        deadline = time.monotonic() + DRAIN_S
        while self.received < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)  # the benchmark's polling of its own counter
        return True

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2.0)


def publish(publisher: mailbus.Publisher, count: int, rate: float | None) -> float:
    """Publish `count` numbered messages at `rate` (None: as fast as it goes); seconds."""
    started = time.monotonic()
    for seq in range(count):
        if rate is not None and seq % 10 == 0:
            ahead = started + seq / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # the publishing schedule
        publisher.publish(json.dumps({"seq": seq, "t": time.time_ns(), "v": 21.5}))
    return time.monotonic() - started


def with_client(
    ctx: mailbus.Context, publisher: mailbus.Publisher, server: FoxgloveServer, expected: int
) -> subprocess.Popen[str]:
    return with_client_at(server.url, publisher, expected)


def with_client_at(url: str, publisher: mailbus.Publisher, expected: int) -> subprocess.Popen[str]:
    """A Foxglove client process, subscribed and receiving, before the measured run."""
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, url, TOPIC, str(expected)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(client.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + READY_S
    while not ready and time.monotonic() < deadline:
        publisher.publish(json.dumps({"seq": -1, "t": time.time_ns(), "v": 0.0}))
        reader.join(0.02)
    if not ready or ready[0].strip() != "ready":
        client.kill()
        raise RuntimeError("the Foxglove client never received a message")
    return client


def client_result(client: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = client.communicate(timeout=DRAIN_S)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def rate_of(received: int, first: int | None, last: int | None) -> float:
    if not received or first is None or last is None or last <= first:
        return 0.0
    return (received - 1) / ((last - first) / 1e9)


def paced_run(count: int, rate: float) -> dict[str, Any]:
    with mailbus.Context(Options()) as ctx, FoxgloveServer(ctx, port=0) as server:
        publisher = ctx.publisher(TOPIC)
        taker = Taker(ctx)
        client = with_client(ctx, publisher, server, count)
        took_s = publish(publisher, count, rate)
        taker.wait_for(count)
        seen = client_result(client)
        taker.close()
        plain_rate = rate_of(taker.received, taker.first, taker.last)
        client_rate = rate_of(seen["received"], seen["first_ns"], seen["last_ns"])
        log(
            f"  {rate:,.0f} msg/s asked, {count / took_s:,.0f} published; plain took "
            f"{taker.received} at {plain_rate:,.0f}/s, client {seen['received']} at "
            f"{client_rate:,.0f}/s; cut off {server.stats['cut_off']}"
        )
        return {
            "plain_rate": plain_rate,
            "client_rate": client_rate if seen["received"] == count else 0.0,
            "client_received": seen["received"],
            "plain_p50_ms": statistics.median(taker.latencies_ms),
            "client_p50_ms": seen["latency_p50_ms"],
        }


def throughput(count: int, bridged: bool, cut_off: list[int]) -> float:
    """Messages per second until the plain subscription took all `count` (a client
    cut off for falling behind is counted in `cut_off`)."""
    with mailbus.Context(Options()) as ctx:
        publisher = ctx.publisher(TOPIC)
        taker = Taker(ctx)
        server = client = None
        if bridged:
            server = FoxgloveServer(ctx, port=0).start()
            client = with_client(ctx, publisher, server, count)
        started = time.monotonic()
        publish(publisher, count, None)
        taker.wait_for(count)
        elapsed = time.monotonic() - started
        taker.close()
        if client is not None:
            client_result(client)
        if server is not None:
            cut_off.append(server.stats["cut_off"])
            server.stop()
    return count / elapsed


class Daemon:
    """`mailbus postoffice serve` in a process of its own."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "mailbus", "postoffice", "serve", "--port", "0"),
                *("--hash-cost", "8", "--sync", "normal", "--store", f"{root}/po.db"),
                *("--max-letters-per-box", "1000000"),
            ],
            env={**os.environ, "MAILBUS_POSTOFFICE_PASSWORD": PASSWORD},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.port = int(line.rsplit(":", 1)[1].split()[0])

    def table(self, box: str) -> dict[str, Any]:
        return {"port": self.port, "box": box, "password": PASSWORD}

    def config(self, box: str) -> str:
        path = f"{self.root}/{box}.toml"
        with open(path, "w") as out:
            out.write(
                f'transport = "postoffice"\n[postoffice]\nport = {self.port}\n'
                f'box = "{box}"\npassword = "{PASSWORD}"\n'
            )
        return path

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()


def system_round(daemon: Daemon, group: str, count: int, bridge_on: bool, client: bool) -> float:
    """The system's messages per second in processes: without the bridge, with it and no
    client, or with it serving a subscribed client."""
    plain = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PLAIN,
            str(daemon.port),
            f"{group}.plain",
            PASSWORD,
            TOPIC,
            str(count),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    started: list[subprocess.Popen[str]] = [plain]
    try:
        if _line(plain) != "ready":
            raise RuntimeError("the plain subscriber did not start")
        options = options_from_mapping(
            {"transport": "postoffice", "postoffice": daemon.table(f"{group}.pub")}
        )
        with mailbus.Context(options) as ctx:
            publisher = ctx.publisher(TOPIC)
            if bridge_on:
                config = daemon.config(f"{group}.fox")
                bridge = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "mailbus",
                        "--config",
                        config,
                        "foxglove",
                        "--port",
                        "0",
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                started.append(bridge)
                url = _line(bridge).split("serving ", 1)[1].split()[0]
                if client:
                    started.append(with_client_at(url, publisher, count))
            begun = time.time()
            sent = 0
            while sent < count:
                try:
                    publisher.publish(json.dumps({"seq": sent, "t": time.time_ns(), "v": 1.5}))
                except TransportError:  # the daemon's backlog is full: let it catch up
                    time.sleep(0.005)
                    continue
                sent += 1
            out, _ = plain.communicate(timeout=DRAIN_S)
        result = json.loads(out.strip().splitlines()[-1])
        if result["received"] != count:
            raise RuntimeError(f"the plain subscriber took {result['received']} of {count}")
        return count / (result["last"] - begun)
    finally:
        for process in reversed(started):
            if process.poll() is None:
                process.terminate()
                process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else 3.0

    log(f"client_ratio: 10,000 msg/s for {seconds:g} s")
    fast = paced_run(int(10_000 * seconds), 10_000.0)
    client_ratio = fast["client_rate"] / fast["plain_rate"] if fast["plain_rate"] else 0.0

    log(f"added latency: 1,000 msg/s for {1 if args.quick else 2} s")
    slow = paced_run(1_000 if args.quick else 2_000, 1_000.0)
    added_ms = slow["client_p50_ms"] - slow["plain_p50_ms"]

    rounds = 1 if args.quick else 3
    count = 1_500 if args.quick else 10_000
    log(f"system_ratio: {count:,} messages over PostOffice, processes, {rounds} rounds")
    alone: list[float] = []
    idle: list[float] = []
    served: list[float] = []
    with tempfile.TemporaryDirectory() as root:
        daemon = Daemon(root)
        try:
            configurations = [
                (alone, "a", False, False),
                (idle, "i", True, False),
                (served, "c", True, True),
            ]
            for r in range(rounds):
                # Each round starts with another configuration: the machine's drift
                # (other jobs) falls on each alike.
                for figures, tag, bridge_on, client in (
                    configurations[r % 3 :] + configurations[: r % 3]
                ):
                    figures.append(system_round(daemon, f"{tag}{r}", count, bridge_on, client))
                log(
                    f"  round {r + 1}: {alone[-1]:,.0f} msg/s without the bridge, "
                    f"{idle[-1]:,.0f} with it and no client, {served[-1]:,.0f} with a client"
                )
        finally:
            daemon.stop()
    system_ratio = statistics.median(served) / statistics.median(idle)
    no_bridge_ratio = statistics.median(served) / statistics.median(alone)

    log("the same in one process (the bridge in the publisher's interpreter)")
    in_alone: list[float] = []
    in_served: list[float] = []
    in_cut: list[int] = []
    for r in range(rounds):
        in_alone.append(throughput(count * 3, bridged=False, cut_off=in_cut))
        in_served.append(throughput(count * 3, bridged=True, cut_off=in_cut))
        log(f"  round {r + 1}: {in_alone[-1]:,.0f} msg/s alone, {in_served[-1]:,.0f} bridged")
    inprocess_ratio = statistics.median(in_served) / statistics.median(in_alone)

    print(
        json.dumps(
            {
                "client_ratio": round(client_ratio, 3),
                "added_latency_p50_ms": round(added_ms, 3),
                "system_ratio": round(system_ratio, 3),
                "client_msgs_per_s": round(fast["client_rate"]),
                "plain_msgs_per_s": round(fast["plain_rate"]),
                "client_latency_p50_ms_1k": round(slow["client_p50_ms"], 3),
                "plain_latency_p50_ms_1k": round(slow["plain_p50_ms"], 3),
                "client_latency_p50_ms_10k": round(fast["client_p50_ms"], 3),
                "system_ratio_to_no_bridge": round(no_bridge_ratio, 3),
                "system_msgs_per_s_no_bridge": round(statistics.median(alone)),
                "system_msgs_per_s_no_client": round(statistics.median(idle)),
                "system_msgs_per_s_with_client": round(statistics.median(served)),
                "system_ratio_inprocess": round(inprocess_ratio, 3),
                "inprocess_msgs_per_s_alone": round(statistics.median(in_alone)),
                "inprocess_msgs_per_s_with_client": round(statistics.median(in_served)),
                "inprocess_clients_cut_off": sum(in_cut),
            }
        )
    )


if __name__ == "__main__":
    main()
