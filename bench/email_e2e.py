"""End to end over a real mail stack on loopback (Postfix + Dovecot or Cyrus IMAP, TLS
everywhere).

    python -m bench.email_e2e [--quick] [--server dovecot|cyrus]

Measured in the same run, each beside its baseline:
- throughput: N messages published and taken through Mailbus (pycurl SMTPS sender,
  imapclient receiver) against the floor: stdlib smtplib on one SMTPS connection into
  the same Postfix, read by a bare imapclient loop (NOOP, UID SEARCH, FETCH);
- latency publish -> take, one message at a time: Mailbus, the floor, and the
  reference's strategy (EXAMINE, then one UID FETCH per poll) at the same poll period;
- catch-up: messages/s read from a backlog already in the inbox (5,000 messages) by
  Mailbus starting at UID 1, against the reference's strategy (timed on the first
  part of the same backlog: its cost per message is constant);
- the first message after 10 s of quiet (the receiver waits in IDLE by then), beside the
  server's own IDLE announcement delay (bench.imap_probes: mail delivered over LMTP ->
  EXISTS seen by a bare client in IDLE).

The last stdout line is one JSON object with the keys of shared/BENCH.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import smtplib
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import imapclient
import mailbus
from mailbus import headers as H
from mailbus.email_message import Email, to_bytes
from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.mail.transport import create_transport
from mailbus.options import Options, options_from_mapping
from mailbus.stacks.mail_servers import SERVERS, new_mail_stack
from mailbus.stacks.mailstack import MailStack, User
from mailbus.transport import EmailReceiver, Inbound, RawEmail, Transport

from bench.imap_probes import idle_notification_delay_ms

PERIOD_MS = 10.0
QUIET_S = 10.0  # the quiet spell before the first message of a burst


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def options(
    stack: MailStack,
    user: User,
    period_ms: float = PERIOD_MS,
    signing: dict[str, Any] | None = None,
    **mail: Any,
) -> Options:
    return options_from_mapping(
        {
            **({"signing": signing} if signing else {}),
            "transport": "email",
            "url-smtp": stack.smtps_url,
            "url-imap": stack.imaps_url,
            "username": user.address,
            "password": user.password,
            "ca-file": stack.ca_file,
            "polling-period-ms": period_ms,
            "recipients": {"to": [user.address]},
            "mail": {"reconnect-max-s": 1.0, **mail},
        },
        {},
    )


def signed_options(stack: MailStack, user: User, directory: Path) -> Options:
    """`options` with [signing]: an ed25519 key, its keyring entry, signatures required
    and the replay state on disk: everything signed mail costs a participant."""
    from mailbus.signing.config import key_name
    from mailbus.signing.keys import new_ed25519_key, write_private_key

    private, record = new_ed25519_key()
    write_private_key(directory / "bench.key", private)
    signing = {
        "domain": "mailbus.test",
        "selector": "bench",
        "private-key-file": str(directory / "bench.key"),
        "require-signature": True,
        "state-dir": str(directory / "state"),
        "keyring": {key_name("bench", "mailbus.test"): record},
    }
    return options(stack, user, signing=signing)


def imap_client(stack: MailStack, user: User) -> imapclient.IMAPClient:
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    client = imapclient.IMAPClient("127.0.0.1", stack.imaps_port, ssl=True, ssl_context=context)
    client.login(user.address, user.password)
    return client


def mailbus_bytes(user: User, body: str) -> bytes:
    """An email as a Mailbus publisher writes it (same size as the engine's)."""
    return to_bytes(
        Email(
            subject="bench",
            body=body,
            sender=user.address,
            to=(user.address,),
            headers={H.SOURCE_TIMESTAMP: str(time.time_ns()), H.PUBLISHER_GID: "f" * 32},
        )
    )


# -- the reference's receive strategy ---------------------------------------------------------
class ReferenceReceiver(EmailReceiver):
    """Every poll: EXAMINE the inbox again, then UID FETCH the one next message."""

    def __init__(self, stack: MailStack, user: User, start_uid: int | None = None) -> None:
        self.client = imap_client(stack, user)
        info = self.client.select_folder("INBOX", readonly=True)
        self.next_uid = start_uid or int(info[b"UIDNEXT"])
        self._woken = threading.Event()

    def receive(self, timeout: float | None) -> list[Inbound]:
        if self._woken.wait(PERIOD_MS / 1000.0):
            self._woken.clear()
            return []
        info = self.client.select_folder("INBOX", readonly=True)
        if int(info[b"UIDNEXT"]) <= self.next_uid:
            return []
        uid = self.next_uid
        self.next_uid += 1
        data = self.client.fetch([uid], ["BODY.PEEK[]"])
        if uid not in data:
            return []
        return [RawEmail(data[uid][b"BODY[]"], origin=f"uid:{uid}")]

    def wake(self) -> None:
        self._woken.set()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.logout()


def reference_context(stack: MailStack, user: User, start_uid: int | None = None) -> Any:
    base = create_transport(options(stack, user), mailbus.Tracer())
    base.receiver.close()
    transport = Transport(base.sender, ReferenceReceiver(stack, user, start_uid), "reference")
    return mailbus.Context(options(stack, user), transport=transport)


# -- the floor: smtplib + a bare imapclient loop ----------------------------------------------
class BareLoop:
    """Polls every period: NOOP, UID SEARCH for new UIDs, FETCH them; records when each
    body was seen."""

    def __init__(self, stack: MailStack, user: User) -> None:
        self.client = imap_client(stack, user)
        info = self.client.select_folder("INBOX", readonly=True)
        self.next_uid = int(info[b"UIDNEXT"])
        self.seen: dict[bytes, int] = {}
        self.count = 0
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(PERIOD_MS / 1000.0):
            self.client.noop()
            uids = [
                u for u in self.client.search(["UID", f"{self.next_uid}:*"]) if u >= self.next_uid
            ]
            if not uids:
                continue
            data = self.client.fetch(uids, ["BODY.PEEK[]"])
            now = time.perf_counter_ns()
            with self._cond:
                for uid in sorted(data):
                    body = data[uid][b"BODY[]"]
                    marker = body.rsplit(b"\r\n\r\n", 1)[-1].strip()
                    self.seen[marker] = now
                    self.count += 1
                self.next_uid = max(uids) + 1
                self._cond.notify_all()

    def wait_count(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.count < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def wait_marker(self, marker: bytes, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while marker not in self.seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self.seen[marker]

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.client.logout()


def smtp_client(stack: MailStack, user: User) -> smtplib.SMTP_SSL:
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    client = smtplib.SMTP_SSL("127.0.0.1", stack.smtps_port, context=context)
    client.login(user.address, user.password)
    return client


# -- measurements ---------------------------------------------------------------------------
def throughput_mailbus(stack: MailStack, n: int) -> float:
    user = stack.add_user()
    with mailbus.Context(options(stack, user)) as ctx:
        sub = ctx.subscription("bench", depth=n + 10)
        pub = ctx.publisher("bench")
        start = time.perf_counter()
        for i in range(n):
            pub.publish(f"t{i}")
        got = 0
        deadline = time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            if mailbus.wait_for_message(sub, 1.0) is not None:
                got += 1
        elapsed = time.perf_counter() - start
    if got < n:
        raise RuntimeError(f"mailbus throughput: only {got} of {n} arrived")
    return n / elapsed


def throughput_floor(stack: MailStack, n: int) -> float:
    user = stack.add_user()
    loop = BareLoop(stack, user)
    smtp = smtp_client(stack, user)
    messages = [mailbus_bytes(user, f"f{i}") for i in range(n)]
    start = time.perf_counter()
    for data in messages:
        smtp.sendmail(user.address, [user.address], data)
    ok = loop.wait_count(n, 120)
    elapsed = time.perf_counter() - start
    smtp.quit()
    loop.stop()
    if not ok:
        raise RuntimeError(f"floor throughput: only {loop.count} of {n} arrived")
    return n / elapsed


def latency_context(ctx: Any, samples: int) -> list[float]:
    with ctx:
        sub = ctx.subscription("bench", depth=10)
        pub = ctx.publisher("bench")
        out = []
        for i in range(samples + 3):
            start = time.perf_counter_ns()
            pub.publish(f"l{i}")
            message = mailbus.wait_for_message(sub, 10.0)
            if message is None:
                raise RuntimeError(f"latency sample {i} never arrived")
            if i >= 3:  # the first ones warm up the connections
                out.append((time.perf_counter_ns() - start) / 1e6)
    return out


def latency_floor(stack: MailStack, samples: int) -> list[float]:
    user = stack.add_user()
    loop = BareLoop(stack, user)
    smtp = smtp_client(stack, user)
    out = []
    for i in range(samples + 3):
        marker = f"floor-{i}"
        data = mailbus_bytes(user, marker)
        start = time.perf_counter_ns()
        smtp.sendmail(user.address, [user.address], data)
        seen = loop.wait_marker(marker.encode(), 10.0)
        if seen is None:
            raise RuntimeError(f"floor latency sample {i} never arrived")
        if i >= 3:
            out.append((seen - start) / 1e6)
    smtp.quit()
    loop.stop()
    return out


def first_message_after_quiet(stack: MailStack, samples: int, quiet_s: float) -> list[float]:
    """Publish -> take of one message after `quiet_s` without mail (default schedule:
    IDLE once quiet for 2 s)."""
    ctx = mailbus.Context(options(stack, stack.add_user()))
    with ctx:
        sub = ctx.subscription("bench", depth=10)
        pub = ctx.publisher("bench")
        pub.publish("warm-up")
        if mailbus.wait_for_message(sub, 10.0) is None:
            raise RuntimeError("first-message warm-up never arrived")
        out = []
        for i in range(samples):
            time.sleep(quiet_s)  # the quiet spell is what is measured, not a wait
            start = time.perf_counter_ns()
            pub.publish(f"q{i}")
            if mailbus.wait_for_message(sub, 40.0) is None:
                raise RuntimeError(f"first message {i} after the quiet never arrived")
            out.append((time.perf_counter_ns() - start) / 1e6)
            log(f"  sample {i}: {out[-1]:.1f} ms")
        idles = int(ctx.transport.receiver.counters["idles"])  # type: ignore[union-attr]
        if idles < samples:
            raise RuntimeError(
                f"the receiver went to IDLE {idles} times for {samples} quiet spells"
            )
    return out


def fill_backlog(stack: MailStack, user: User, n: int) -> None:
    """Put n Mailbus emails into the inbox with IMAP MULTIAPPEND (500 per command; one
    APPEND each on Cyrus, which refuses imapclient's MULTIAPPEND as "Missing required
    argument"), then examine it once so that the server's own indexing is not part of
    the timing."""
    client = imap_client(stack, user)
    try:
        for first in range(0, n, 500):
            batch = [mailbus_bytes(user, f"b{i}") for i in range(first, min(n, first + 500))]
            if stack.server == "cyrus":
                for data in batch:
                    client.append("INBOX", data)
            else:
                client.multiappend("INBOX", batch)
            log(f"  backlog {first + len(batch)}/{n}")
        client.select_folder("INBOX", readonly=True)
    finally:
        client.logout()


def catchup(ctx: Any, n: int, timeout: float) -> tuple[int, float]:
    """Messages taken from the backlog and the rate, from init to the n-th (or timeout)."""
    start = time.perf_counter()
    with ctx:
        sub = ctx.subscription("bench", depth=n + 10)
        got = 0
        deadline = time.monotonic() + timeout
        while got < n and time.monotonic() < deadline:
            if mailbus.wait_for_message(sub, 0.5) is not None:
                got += 1
        elapsed = time.perf_counter() - start
    return got, got / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages (about 30 s)")
    parser.add_argument("--server", choices=SERVERS, default="dovecot", help="the IMAP server")
    args = parser.parse_args()
    n_throughput = 300 if args.quick else 2000
    samples = 40 if args.quick else 150
    backlog = 1000 if args.quick else 5000
    reference_budget_s = 4.0 if args.quick else 8.0

    with new_mail_stack(args.server) as stack:
        if not stack.has_postfix:
            log(f"NOTE: {stack.why_no_postfix}; SMTP goes through the LMTP relay")
        log(f"stack up ({stack.server}): {stack.smtps_url} {stack.imaps_url}")
        smtp_server = stack.smtp_server

        log(f"throughput: floor (smtplib + bare imapclient), {n_throughput} messages")
        floor_tp = throughput_floor(stack, n_throughput)
        log(f"  {floor_tp:.1f} msg/s")
        log(f"throughput: mailbus, {n_throughput} messages")
        ours_tp = throughput_mailbus(stack, n_throughput)
        log(f"  {ours_tp:.1f} msg/s")

        log(f"latency: floor, {samples} samples")
        floor_lat = latency_floor(stack, samples)
        log(f"  p50 {statistics.median(floor_lat):.1f} ms")
        log(f"latency: mailbus, {samples} samples")
        ours_lat = latency_context(mailbus.Context(options(stack, stack.add_user())), samples)
        log(f"  p50 {statistics.median(ours_lat):.1f} ms p95 {percentile(ours_lat, 0.95):.1f}")
        log(f"latency: mailbus with signatures (ed25519, required), {samples} samples")
        with tempfile.TemporaryDirectory() as keys:
            signed = signed_options(stack, stack.add_user(), Path(keys))
            signed_lat = latency_context(mailbus.Context(signed), samples)
        log(
            f"  p50 {statistics.median(signed_lat):.1f} ms "
            f"({statistics.median(signed_lat) / statistics.median(ours_lat):.2f} x unsigned)"
        )
        log(f"latency: reference strategy, {samples} samples")
        ref_lat = latency_context(reference_context(stack, stack.add_user()), samples)
        log(f"  p50 {statistics.median(ref_lat):.1f} ms")

        idle_samples = 5 if args.quick else 12
        log(f"latency: IDLE at a 2 s poll period, {idle_samples} samples")
        idle_options = options(stack, stack.add_user(), period_ms=2000.0, idle="always")
        idle_lat = latency_context(mailbus.Context(idle_options), idle_samples)
        log(f"  p50 {statistics.median(idle_lat):.1f} ms")

        quiet_samples = 3 if args.quick else 5
        log(f"IDLE announcement: the server's own delay, {quiet_samples * 2} deliveries")
        announce = idle_notification_delay_ms(stack, quiet_samples * 2)
        log(f"  p50 {statistics.median(announce):.1f} ms max {max(announce):.1f}")
        log(f"first message after {QUIET_S:.0f} s of quiet, {quiet_samples} samples")
        first = first_message_after_quiet(stack, quiet_samples, QUIET_S)
        log(f"  p50 {statistics.median(first):.1f} ms")

        user = stack.add_user()
        log(f"catch-up: filling a backlog of {backlog} messages")
        fill_backlog(stack, user, backlog)
        log("catch-up: mailbus from UID 1")
        got, ours_cu = catchup(
            mailbus.Context(options(stack, user, **{"start-uid": 1})), backlog, 120
        )
        if got < backlog:
            raise RuntimeError(f"catch-up: only {got} of {backlog}")
        log(f"  {ours_cu:.0f} msg/s")
        log(f"catch-up: reference strategy from UID 1 for {reference_budget_s:.0f} s")
        ref_got, ref_cu = catchup(
            reference_context(stack, user, start_uid=1), backlog, reference_budget_s
        )
        log(f"  {ref_got} messages, {ref_cu:.0f} msg/s")

    result = {
        "throughput_msgs_per_s": round(ours_tp, 1),
        "floor_throughput_msgs_per_s": round(floor_tp, 1),
        "throughput_ratio": round(ours_tp / floor_tp, 3),
        "latency_p50_ms": round(statistics.median(ours_lat), 2),
        "latency_p95_ms": round(percentile(ours_lat, 0.95), 2),
        "floor_latency_p50_ms": round(statistics.median(floor_lat), 2),
        "floor_latency_p95_ms": round(percentile(floor_lat, 0.95), 2),
        "latency_ratio": round(statistics.median(ours_lat) / statistics.median(floor_lat), 3),
        "signed_latency_p50_ms": round(statistics.median(signed_lat), 2),
        "signed_latency_p95_ms": round(percentile(signed_lat, 0.95), 2),
        "signed_latency_ratio": round(
            statistics.median(signed_lat) / statistics.median(ours_lat), 3
        ),
        "reference_strategy_latency_p50_ms": round(statistics.median(ref_lat), 2),
        "reference_strategy_latency_p95_ms": round(percentile(ref_lat, 0.95), 2),
        "idle_latency_p50_ms": round(statistics.median(idle_lat), 2),
        "idle_first_message_ms": round(statistics.median(first), 2),
        "idle_first_message_max_ms": round(max(first), 2),
        "idle_announce_p50_ms": round(statistics.median(announce), 2),
        "idle_announce_max_ms": round(max(announce), 2),
        "catchup_msgs_per_s": round(ours_cu, 1),
        "reference_catchup_msgs_per_s": round(ref_cu, 1),
        "catchup_speedup_vs_reference": round(ours_cu / ref_cu, 2),
        "poll_period_ms": PERIOD_MS,
        "smtp_server": smtp_server,
        "imap_server": args.server,
        "messages": n_throughput,
        "latency_samples": samples,
        "backlog": backlog,
        "quick": args.quick,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
