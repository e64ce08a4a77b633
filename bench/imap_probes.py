"""IMAP-level measurements for bench.email_scale: Dovecot's IDLE notification delay and
the rate of empty polls (NOOP then UID FETCH against NOOP alone) on one connection."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mailbus.mail import imap_wire

if TYPE_CHECKING:
    from mailbus.stacks.mailstack import MailStack


def idle_notification_delay_ms(stack: MailStack, samples: int) -> list[float]:
    """Mail delivered straight into Dovecot (LMTP) -> its EXISTS seen by a client that
    sits in IDLE."""
    from bench.email_e2e import imap_client, mailbus_bytes

    user = stack.add_user()
    client = imap_client(stack, user)
    client.select_folder("INBOX", readonly=True)
    out = []
    try:
        for i in range(samples):
            client.idle()
            start = time.perf_counter()
            stack.deliver(user.address, mailbus_bytes(user, f"idle-{i}"))
            deadline = time.monotonic() + 10
            seen = False
            while not seen and time.monotonic() < deadline:
                seen = any(len(r) > 1 and r[1] == b"EXISTS" for r in client.idle_check(1.0))
            if seen:
                out.append((time.perf_counter() - start) * 1000)
            client.idle_done()
    finally:
        client.logout()
    return out


def poll_rates(stack: MailStack, seconds: float) -> tuple[float, float]:
    """Empty polls per second on one connection: NOOP then UID FETCH (today's two round
    trips) against NOOP alone (the adaptive receiver's empty poll: it fetches only when
    NOOP reports EXISTS)."""
    from bench.email_e2e import imap_client

    user = stack.add_user()
    client = imap_client(stack, user)
    info = client.select_folder("INBOX", readonly=True)
    uids = f"{int(info[b'UIDNEXT'])}:*".encode()
    items = b"(UID RFC822.SIZE)"
    try:
        rates = []
        for fetch in (True, False):
            polls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                imap_wire.command(client, "NOOP")
                if fetch:
                    imap_wire.command(client, "UID", "FETCH", uids, items)
                imap_wire.clear_untagged(client)
                polls += 1
            rates.append(polls / (time.perf_counter() - start))
    finally:
        client.logout()
    return rates[0], rates[1]
