"""The signature gate's attacks over a real PostOffice daemon, which keeps a letter's
bytes exactly as sent (no mail server in between to neutralise a bare CR): the forged
letters are skipped with their reason, the genuine one is taken."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import mailbus
import pytest
from mailbus.options import options_from_mapping
from mailbus.signing.keys import new_ed25519_key
from mailbus.trace import Kind, TraceEvent

from .conftest import Daemon, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_signing import NAME, mailbus_email, signed
from test_signing_attacks import smuggled_prefix

PASSWORD = "Zq9-letter-K3y-long"


@pytest.mark.parametrize("attack", ["bare-cr-smuggling", "stale-with-fresh-timestamp"])
def test_forged_letters_are_refused_over_postoffice(daemon: Daemon, attack: str) -> None:
    key, record = new_ed25519_key()
    signing = {"require-signature": True, "keyring": {NAME: record}}
    table = {"port": daemon.port, "box": "lab.sub", "password": PASSWORD}
    options = options_from_mapping(
        {"transport": "postoffice", "postoffice": table, "signing": signing}
    )
    events: list[TraceEvent] = []
    now = time.time_ns()
    email: Any = mailbus_email()
    if attack == "stale-with-fresh-timestamp":
        email.headers = {**email.headers, "Source-Timestamp": str(now - 365 * 86400 * 10**9)}
    forged = smuggled_prefix(now) + signed(key, email)[1]
    genuine = signed(key, mailbus_email("lab/reactor/shutdown", '{"cmd": "stop"}'))[1]
    with mailbus.Context(options) as ctx:
        ctx.tracer.add_listener(events.append)
        shutdown = ctx.subscription("lab/reactor/shutdown")
        sender = daemon.client()
        sender.create_box("lab.attacker", PASSWORD)
        sender.check_out("lab.attacker", PASSWORD)
        sender.send("lab.sub", forged)  # byte for byte, as captured and prefixed
        sender.send("lab.sub", genuine)
        message = mailbus.wait_for_message(shutdown, 10.0)
        assert message is not None and message.body == '{"cmd": "stop"}'
        wait_until(lambda: [e for e in events if e.kind == Kind.SKIPPED], 10.0)
        assert mailbus.wait_for_message(shutdown, 0) is None  # the forged one never came
        sender.close()
    [refused] = [e for e in events if e.kind == Kind.SKIPPED]
    assert refused.extra["reason"] == "bad_signature"
    assert refused.detail == (
        "bad signature: a bare CR in the header block (line ends must be CRLF or LF)"
    )
    assert ctx.counters["bad_signature"] == 1
