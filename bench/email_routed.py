"""The routed mode against the shared inbox, on the real stack (Dovecot + Pigeonhole Sieve).

    python -m bench.email_routed [--quick]

Measured in the same run:
- bytes fetched per published message by a participant subscribed to 1 of 10 topics
  while a publisher sends to all 10 in turn: shared inbox (it fetches every body) vs
  routed (Sieve files each topic into its folder; it reads only its own);
- that subscriber's publish -> take latency in both modes;
- the cost of one poll on Dovecot: NOOP (shared inbox), LIST-STATUS naming the
  3 folders read, and LIST-STATUS matching `mailbus-*` with 100 folders present;
- the first-message latency after a quiet spell in the routed mode (IDLE + NOTIFY).

The last stdout line is one JSON object: `routed_bytes_fetched_per_message`,
`inbox_bytes_fetched_per_message`, `bytes_ratio`, `routed_latency_p50_ms`,
`inbox_latency_p50_ms`, `noop_poll_ms`, `list_status_3_folders_ms`,
`list_status_pattern_100_folders_ms`, `notify_first_message_ms`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import imapclient
import mailbus
from mailbus.mail import imap_wire
from mailbus.mail.sieve_install import SieveSettings, install_script
from mailbus.mail.sieve_script import Routes, sieve_script
from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.options import Options, options_from_mapping
from mailbus.stacks.mailstack import MailStack, User

TOPICS = [f"robot/sensor{i}" for i in range(10)]
BODY = "x" * 2000  # every message: about 3 KB on the wire


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def options(stack: MailStack, user: User, **mail: Any) -> Options:
    return options_from_mapping(
        {
            "transport": "email",
            "url-smtp": stack.smtps_url,
            "url-imap": stack.imaps_url,
            "username": user.address,
            "password": user.password,
            "ca-file": stack.ca_file,
            "polling-period-ms": 10,
            "recipients": {"to": [user.address]},
            "mail": {"reconnect-max-s": 1.0, **mail},
        },
        {},
    )


def one_of_ten(stack: MailStack, user: User, rounds: int, **mail: Any) -> tuple[float, float]:
    """Bytes fetched per published message, and the p50 latency (ms) of the one topic."""
    with (
        mailbus.Context(options(stack, user, **mail)) as subscriber,
        mailbus.Context(options(stack, user)) as publisher,
    ):
        sub = subscriber.subscription(TOPICS[0], depth=rounds + 10)
        receiver: Any = subscriber.transport.receiver
        time.sleep(0.5)  # let the routed receiver take up its folder (not a sync point)
        before = receiver.counters["bytes_fetched"]
        pubs = [publisher.publisher(t) for t in TOPICS]
        latencies = []
        for i in range(rounds):
            for pub in pubs:
                pub.publish(f"{BODY}{i}")
            message = mailbus.wait_for_message(sub, 30.0)
            if message is None:
                raise RuntimeError(f"round {i}: the subscriber's message never came")
            info = message.info
            latencies.append((info.reception_timestamp_ns - info.source_timestamp_ns) / 1e6)
        # The other topics' mail of the last round may still be on its way: wait for it
        # to be read (shared inbox) so both modes count every message.
        time.sleep(1.0)
        fetched = receiver.counters["bytes_fetched"] - before
        return fetched / (rounds * len(TOPICS)), statistics.median(latencies)


def poll_costs(stack: MailStack, user: User, repeats: int) -> dict[str, float]:
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    with imapclient.IMAPClient("127.0.0.1", stack.imaps_port, ssl_context=context) as client:
        client.login(user.address, user.password)
        for i in range(100):
            client.create_folder(f"mailbus-t-bench{i}")
        client.select_folder("INBOX", readonly=True)

        def timed(*args: str) -> float:
            start = time.perf_counter()
            for _ in range(repeats):
                imap_wire.command(client, *args)
                imap_wire.clear_untagged(client)
            return 1000 * (time.perf_counter() - start) / repeats

        status = "(STATUS (UIDNEXT UIDVALIDITY))"
        three = '("mailbus-t-bench1" "mailbus-t-bench2" "INBOX")'
        return {
            "noop_poll_ms": timed("NOOP"),
            "list_status_3_folders_ms": timed("LIST", '""', three, "RETURN", status),
            "list_status_pattern_100_folders_ms": timed(
                "LIST", '""', '"mailbus-*"', "RETURN", status
            ),
        }


def notify_latency(stack: MailStack, user: User, samples: int, **mail: Any) -> float:
    quiet = {**mail, "quiet-ms": 100, "idle-recheck-s": 60}
    with (
        mailbus.Context(options(stack, user, **quiet)) as subscriber,
        mailbus.Context(options(stack, user)) as publisher,
    ):
        sub = subscriber.subscription(TOPICS[0], depth=samples + 5)
        receiver: Any = subscriber.transport.receiver
        latencies = []
        for i in range(samples):
            deadline = time.monotonic() + 15
            idles = receiver.counters["idles"]
            while receiver.counters["idles"] == idles and time.monotonic() < deadline:
                time.sleep(0.02)  # waiting for the receiver to go quiet, bounded
            publisher.publisher(TOPICS[0]).publish(f"quiet {i}")
            message = mailbus.wait_for_message(sub, 15.0)
            if message is None:
                raise RuntimeError("no message after the quiet spell")
            info = message.info
            latencies.append((info.reception_timestamp_ns - info.source_timestamp_ns) / 1e6)
        return statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 10 if args.quick else 30
    with MailStack() as stack:
        plain, routed_user, probe = stack.add_user(), stack.add_user(), stack.add_user()
        routes = Routes(tuple(TOPICS))
        tls = TlsSettings(ca_file=stack.ca_file)
        sieve = SieveSettings(stack.sieve_url, routed_user.address, routed_user.password, tls)
        install_script(sieve, sieve_script(routes))
        routed = {"routing": "sieve", "routed-topics": TOPICS}
        log(f"shared inbox: 1 of {len(TOPICS)} topics, {rounds} rounds")
        inbox_bytes, inbox_p50 = one_of_ten(stack, plain, rounds)
        log(f"  {inbox_bytes:.0f} bytes fetched per published message, p50 {inbox_p50:.1f} ms")
        log("routed (Sieve folders)")
        routed_bytes, routed_p50 = one_of_ten(stack, routed_user, rounds, **routed)
        log(f"  {routed_bytes:.0f} bytes fetched per published message, p50 {routed_p50:.1f} ms")
        costs = poll_costs(stack, probe, 50 if args.quick else 200)
        log(f"poll costs: {costs}")
        notify_ms = notify_latency(stack, routed_user, 3 if args.quick else 8, **routed)
        log(f"first message after a quiet spell (NOTIFY): p50 {notify_ms:.0f} ms")
    result = {
        "routed_bytes_fetched_per_message": round(routed_bytes, 1),
        "inbox_bytes_fetched_per_message": round(inbox_bytes, 1),
        "bytes_ratio": round(inbox_bytes / routed_bytes, 2) if routed_bytes else None,
        "routed_latency_p50_ms": round(routed_p50, 1),
        "inbox_latency_p50_ms": round(inbox_p50, 1),
        **{key: round(value, 3) for key, value in costs.items()},
        "notify_first_message_ms": round(notify_ms, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
