"""Email at scale: N subscriber processes on one inbox of the real loopback stack
(Postfix + Dovecot or Cyrus IMAP, TLS), a publisher at 20 msg/s.

    python -m bench.email_scale [--quick] [--sizes 1,8,32,100] [--modes baseline,relay]
                                [--server dovecot|cyrus]

For each receive mode and each N it starts N participant processes (this module with
`--participant`), each a Mailbus context with one subscription on the same account,
and measures:
- idle cost: CPU of the participants while nothing is sent (cores per participant),
  after the receivers settled (an adaptive receiver goes to IDLE after its quiet time);
- traffic: the publisher (in this process; in relay mode one of the relay's
  participants, which nudges the relay when it sends) sends M messages at 20 msg/s; each
  participant takes them and reports publish -> take latency, what it got (lost and
  duplicated are counted from the bodies), and the bytes its receiver fetched;
  server CPU (every Dovecot and Postfix process, reaped children included) and
  participants' CPU over the traffic window.

Modes, in the same run: `baseline` is today's strategy (a 10 ms poll per participant,
`idle = "never"`); `relay` (the measured mode, the keys without prefix) is one host
relay (`mailbus mail-relay`, its own process, the adaptive receiver) reading the inbox
for every participant (`[mail] share = "relay"`); its CPU counts as the participants'
and its IMAP bytes as theirs. `adaptive` (keys `adaptive_`, only with --modes) is every
participant reading the inbox itself with the adaptive receiver; `routed` (keys
`routed_`, only with --modes) is every participant in the routed mode, the server's
Sieve filing the topic into its folder (script installed over ManageSieve). Also measured:
Dovecot's IDLE notification delay (mail delivered over LMTP -> EXISTS seen by an idling
client) and one poll as two round trips (NOOP, then UID FETCH) against NOOP alone.

The last stdout line is one JSON object with the keys of shared/BENCH.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mailbus
from mailbus.options import options_from_mapping
from mailbus.stacks.mail_servers import SERVERS, new_mail_stack
from mailbus.stacks.mailstack import MailStack, User

from bench.imap_probes import idle_notification_delay_ms, poll_rates

RATE_PER_S = 20.0
WAVE = 16
TOPIC = "scale"
ENV_OPTIONS = "MAILBUS_SCALE_OPTIONS"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# Receive modes: polling-period-ms and the [mail] table.
MODES: dict[str, dict[str, Any]] = {
    "baseline": {"polling-period-ms": 10.0, "mail": {"idle": "never"}},
    "adaptive": {"mail": {}},
    "relay": {"mail": {"share": "relay"}},
    "routed": {"mail": {"routing": "sieve", "routed-topics": [TOPIC]}},
}
PREFIX = {"relay": "", "baseline": "baseline_", "adaptive": "adaptive_", "routed": "routed_"}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def raw_options(stack: MailStack, user: User, mode: str) -> dict[str, Any]:
    settings = MODES[mode]
    raw: dict[str, Any] = {
        "transport": "email",
        "url-smtp": stack.smtps_url,
        "url-imap": stack.imaps_url,
        "username": user.address,
        "password": user.password,
        "ca-file": stack.ca_file,
        "recipients": {"to": [user.address]},
        "mail": {"reconnect-max-s": 1.0, **settings["mail"]},
    }
    if "polling-period-ms" in settings:
        raw["polling-period-ms"] = settings["polling-period-ms"]
    if mode == "routed":
        raw["mail"]["url-sieve"] = stack.sieve_url
    if mode == "relay":
        # Short, so that it fits in sun_path whatever TMPDIR is; one relay per user.
        raw["mail"]["relay-socket"] = f"/tmp/mailbus-bench-{os.getpid()}-{user.name}.sock"
    return raw


# -- CPU from /proc ---------------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_cpu_s(pid: int) -> float:
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def session_cpu_s(leaders: list[int]) -> float:
    """CPU of every process in the sessions of `leaders` (the Dovecot and Postfix
    masters run in sessions of their own), children already reaped included."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or int(fields[3]) not in leaders:  # field 6: session id
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS
    return total


def server_leaders(stack: MailStack) -> list[int]:
    return stack.server_pids()


# -- participants -----------------------------------------------------------------------------
@dataclass
class Participant:
    proc: subprocess.Popen[str]
    ready: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "READY":
                self.ready.set()
            elif line.startswith("{"):
                self.result = json.loads(line)
                self.done.set()
        self.ready.set()
        self.done.set()


def start_participants(raw: dict[str, Any], n: int, count: int) -> list[Participant]:
    """N participants, started WAVE at a time: a hundred processes starting at once on
    two cores each log in to SMTP at init and some time out (10 s) in the storm."""
    env = {**os.environ, ENV_OPTIONS: json.dumps(raw)}
    out: list[Participant] = []
    for i in range(n):
        if i and i % WAVE == 0:
            wait_all([p.ready for p in out[-WAVE:]], 60 + 2 * WAVE)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.email_scale", "--participant", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        participant = Participant(proc)
        threading.Thread(target=participant.read, daemon=True).start()
        out.append(participant)
    return out


def wait_all(events: list[threading.Event], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    return all(e.wait(max(0.0, deadline - time.monotonic())) for e in events)


def stop_participants(participants: list[Participant], timeout: float = 60.0) -> None:
    for p in participants:
        with contextlib.suppress(OSError, ValueError):
            assert p.proc.stdin is not None
            p.proc.stdin.write("STOP\n")
            p.proc.stdin.flush()
    wait_all([p.done for p in participants], timeout)
    for p in participants:
        try:
            p.proc.wait(timeout=max(1.0, timeout / 4))
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait()


def participants_cpu_s(participants: list[Participant], relay: Relay | None = None) -> float:
    own = sum(process_cpu_s(p.proc.pid) for p in participants)
    return own + (process_cpu_s(relay.proc.pid) if relay is not None else 0.0)


class Relay:
    """The host relay in its own process (this module with `--relay STATE_DIR`)."""

    def __init__(self, raw: dict[str, Any], state_dir: Path) -> None:
        env = {**os.environ, ENV_OPTIONS: json.dumps(raw)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.email_scale", "--relay", str(state_dir)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            self.proc.kill()
            raise RuntimeError(f"the relay did not start: {line!r}")
        self.counters: dict[str, int] = {}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        for line in out.splitlines():
            if line.startswith("{"):
                self.counters = json.loads(line)


def relay_main(state_dir: str) -> int:
    """The relay of `--modes relay`: the same MailRelay as `mailbus mail-relay`, with
    the options from the environment (as the participants get them)."""
    from mailbus.mail.relay.config import socket_path
    from mailbus.mail.relay.server import MailRelay
    from mailbus.mail.transport import mail_section

    options = options_from_mapping(json.loads(os.environ[ENV_OPTIONS]), {})
    section = mail_section(options)
    relay = MailRelay(options, section, socket_path(options, section), Path(state_dir))
    relay.run(lambda: print("READY", flush=True))
    print(json.dumps(dict(relay.counters)), flush=True)
    return 0


def participant_main(count: int) -> int:
    """One subscriber: prints READY, takes messages until it has `count` or reads STOP,
    then prints one JSON line with what it took."""
    raw = json.loads(os.environ[ENV_OPTIONS])
    ctx = mailbus.Context(options_from_mapping(raw, {}))
    sub = ctx.subscription(TOPIC, depth=count + 100)
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "STOP":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    bodies: list[str] = []
    latencies: list[float] = []
    with ctx:
        print("READY", flush=True)
        while not stop.is_set() and len(bodies) < count:
            message = mailbus.wait_for_message(sub, 0.2)
            if message is not None:
                taken = time.time_ns()
                bodies.append(message.body)
                latencies.append((taken - message.info.source_timestamp_ns) / 1e6)
        receiver = ctx.transport.receiver  # type: ignore[union-attr]
        counters = dict(getattr(receiver, "counters", {}))
    print(json.dumps({"bodies": bodies, "latencies_ms": latencies, "counters": counters}))
    return 0


# -- one point of the curve -------------------------------------------------------------------
@dataclass
class Point:
    mode: str
    n: int
    latencies: list[float] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    server_cpu_s: float = 0.0
    participants_cpu_s: float = 0.0
    traffic_s: float = 0.0
    idle_cores_per_participant: float | None = None
    idle_server_cores_per_participant: float | None = None
    bytes_fetched: int = 0
    messages: int = 0

    def summary(self) -> str:
        lat = self.latencies or [float("nan")]
        idle = self.idle_cores_per_participant
        return (
            f"{self.mode} N={self.n}: p50 {statistics.median(lat):.0f} ms "
            f"p95 {percentile(lat, 0.95):.0f} ms lost {self.lost} dup {self.duplicated} "
            f"server {self.server_cpu_s:.1f} s participants {self.participants_cpu_s:.1f} s "
            f"over {self.traffic_s:.1f} s"
            + (f"; idle {idle:.4f} cores/participant" if idle is not None else "")
        )


def run_point(stack: MailStack, mode: str, n: int, messages: int, idle_window_s: float) -> Point:
    user = stack.add_user()
    raw = raw_options(stack, user, mode)
    point = Point(mode, n, messages=messages)
    state_dir = tempfile.TemporaryDirectory(prefix="mailbus-relay-state-")
    relay = Relay(raw, Path(state_dir.name)) if mode == "relay" else None
    participants = start_participants(raw, n, messages)
    try:
        if not wait_all([p.ready for p in participants], 60 + 5 * n):
            raise RuntimeError(f"{mode} N={n}: participants did not get ready")
        dead = [p for p in participants if p.proc.poll() is not None]
        if dead:
            raise RuntimeError(f"{mode} N={n}: {len(dead)} participants exited at start")
        if idle_window_s > 0:
            # Let each receiver reach its steady state with no traffic first.
            time.sleep(4.0 + n * 0.05)
            leaders = server_leaders(stack)
            before, started = participants_cpu_s(participants, relay), time.monotonic()
            server_before = session_cpu_s(leaders)
            time.sleep(idle_window_s)
            spent = participants_cpu_s(participants, relay) - before
            server_spent = session_cpu_s(leaders) - server_before
            elapsed = time.monotonic() - started
            point.idle_cores_per_participant = spent / elapsed / n
            point.idle_server_cores_per_participant = server_spent / elapsed / n
        # The publisher is on the host too: in relay mode it is one of the relay's
        # participants (and nudges it when it sends); else it reads the inbox itself.
        publisher = raw_options(stack, user, "relay" if mode == "relay" else "adaptive")
        publisher["polling-period-ms"] = 1000.0
        with mailbus.Context(options_from_mapping(publisher, {})) as ctx:
            pub = ctx.publisher(TOPIC)
            server0 = session_cpu_s(server_leaders(stack))
            parts0 = participants_cpu_s(participants, relay)
            start = time.monotonic()
            for i in range(messages):
                # Pacing the publisher at RATE_PER_S (a load generator, not a wait).
                time.sleep(max(0.0, start + i / RATE_PER_S - time.monotonic()))
                pub.publish(f"m{i}")
            wait_all([p.done for p in participants], 30 + messages / RATE_PER_S)
            point.traffic_s = time.monotonic() - start
            point.server_cpu_s = session_cpu_s(server_leaders(stack)) - server0
            point.participants_cpu_s = participants_cpu_s(participants, relay) - parts0
    finally:
        stop_participants(participants)
        if relay is not None:
            relay.stop()
            point.bytes_fetched += int(relay.counters.get("bytes_fetched", 0))
        state_dir.cleanup()
    for p in participants:
        result = p.result or {"bodies": [], "latencies_ms": [], "counters": {}}
        bodies = result["bodies"]
        point.lost += messages - len(set(bodies))
        point.duplicated += len(bodies) - len(set(bodies))
        point.latencies += result["latencies_ms"]
        point.bytes_fetched += int(result["counters"].get("bytes_fetched", 0))
    log("  " + point.summary())
    return point


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages, N up to 32")
    parser.add_argument("--sizes", default=None, help="participants, e.g. 1,8,32,100")
    parser.add_argument("--modes", default="baseline,relay")
    parser.add_argument("--server", choices=SERVERS, default="dovecot", help="the IMAP server")
    parser.add_argument("--participant", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--relay", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.participant is not None:
        return participant_main(args.participant)
    if args.relay is not None:
        return relay_main(args.relay)

    sizes = [int(s) for s in (args.sizes or ("1,8,32" if args.quick else "1,8,32,100")).split(",")]
    modes = args.modes.split(",")
    messages = 100 if args.quick else 200
    idle_window_s = 5.0 if args.quick else 10.0
    points: dict[tuple[str, int], Point] = {}
    failed: list[str] = []
    # One account carries every participant: lift the per-account limit (10).
    with new_mail_stack(args.server, max_userip_connections=max(sizes) + 20) as stack:
        if not stack.has_postfix:
            log(f"NOTE: {stack.why_no_postfix}; SMTP goes through the LMTP relay")
        log(f"{stack.server} IDLE notification delay (LMTP delivery -> EXISTS)")
        idle_delay = idle_notification_delay_ms(stack, 5 if args.quick else 10)
        log(f"  p50 {statistics.median(idle_delay):.0f} ms max {max(idle_delay):.0f} ms")
        two_trips, noop_only = poll_rates(stack, 2.0 if args.quick else 4.0)
        log(f"empty polls/s: NOOP then FETCH {two_trips:.0f}, NOOP alone {noop_only:.0f}")
        for mode in modes:
            for n in sizes:
                if mode == "baseline" and n > 32:
                    continue  # the baseline stops at 32 (it starves the stack)
                log(f"{mode}: N = {n}, {messages} messages at {RATE_PER_S:.0f}/s")
                idle = idle_window_s if n == 8 else 0.0
                try:
                    points[(mode, n)] = run_point(stack, mode, n, messages, idle)
                except Exception as exc:  # the other points still count
                    log(traceback.format_exc())
                    log(f"  FAILED: {exc}")
                    failed.append(f"{mode} N={n}: {exc}")

    def get(mode: str, n: int, what: str) -> float | None:
        point = points.get((mode, n))
        if point is None or not point.latencies:
            return None
        if what == "p50":
            return round(statistics.median(point.latencies), 1)
        if what == "p95":
            return round(percentile(point.latencies, 0.95), 1)
        if what == "server":
            return round(point.server_cpu_s, 2)
        if what == "participants":
            return round(point.participants_cpu_s, 2)
        if what == "bytes":
            return round(point.bytes_fetched / point.messages, 1)
        raise ValueError(what)

    def idle_of(mode: str, server: bool = False) -> float | None:
        point = points.get((mode, 8))
        if point is None:
            return None
        value = (
            point.idle_server_cores_per_participant if server else point.idle_cores_per_participant
        )
        return None if value is None else round(value, 5)

    result: dict[str, Any] = {}
    for mode in modes:
        prefix = PREFIX[mode]
        for n in (1, 8, 32, 100):
            if mode == "baseline" and n == 100:
                continue
            result[f"{prefix}latency_p50_ms_n{n}"] = get(mode, n, "p50")
            result[f"{prefix}latency_p95_ms_n{n}"] = get(mode, n, "p95")
            result[f"{prefix}server_cpu_s_n{n}"] = get(mode, n, "server")
            result[f"{prefix}participants_cpu_s_n{n}"] = get(mode, n, "participants")
        result[f"{prefix}idle_cores_per_participant"] = idle_of(mode)
        result[f"{prefix}idle_server_cores_per_participant"] = idle_of(mode, server=True)
        result[f"{prefix}bytes_fetched_per_message_n1"] = get(mode, 1, "bytes")
        result[f"{prefix}bytes_fetched_per_message_n32"] = get(mode, 32, "bytes")
        result[f"{prefix}lost"] = sum(p.lost for (m, _), p in points.items() if m == mode)
        result[f"{prefix}duplicated"] = sum(
            p.duplicated for (m, _), p in points.items() if m == mode
        )
    base_idle, ours_idle = (
        result.get("baseline_idle_cores_per_participant"),
        result.get("idle_cores_per_participant"),
    )
    result["idle_cost_ratio_vs_baseline"] = (
        round(ours_idle / base_idle, 4) if base_idle and ours_idle is not None else None
    )
    result |= {
        "idle_notification_delay_p50_ms": round(statistics.median(idle_delay), 1),
        "idle_notification_delay_max_ms": round(max(idle_delay), 1),
        "empty_polls_per_s_noop_then_fetch": round(two_trips, 1),
        "empty_polls_per_s_noop_alone": round(noop_only, 1),
        "messages_per_point": messages,
        "rate_msgs_per_s": RATE_PER_S,
        "sizes": sizes,
        "modes": modes,
        "failed_points": failed,
        "quick": args.quick,
        "imap_server": args.server,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
