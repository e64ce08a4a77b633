"""A Context with [outbox] over the real mail stack starts while its SMTP server is
unreachable (queueing for later is the outbox's job), and what it queued then is
delivered by the next start that reaches the server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mailbus
import pytest
from mailbus.options import Options, options_from_mapping
from mailbus.stacks.mailstack import MailStack, free_port

pytestmark = pytest.mark.mailstack


def _options(stack: MailStack, user: Any, smtp_url: str, outbox: Path | None) -> Options:
    raw: dict[str, Any] = {
        "transport": "email",
        "url-smtp": smtp_url,
        "url-imap": stack.imaps_url,
        "username": user.address,
        "password": user.password,
        "ca-file": stack.ca_file,
        "polling-period-ms": 10,
        "recipients": {"to": [user.address]},
        "mail": {"reconnect-max-s": 0.5},
    }
    if outbox is not None:
        raw["outbox"] = {"dir": str(outbox), "first-delay-s": 0.1, "max-delay-s": 0.5}
    return options_from_mapping(raw, {})


def test_a_context_with_an_outbox_starts_while_smtp_is_down_and_delivers_later(
    mail_stack: MailStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = mail_stack.add_user()
    outbox = tmp_path / "outbox"
    down = f"smtps://127.0.0.1:{free_port()}"
    with mailbus.Context(_options(mail_stack, user, down, outbox)) as ctx:
        assert ctx.transport.name == "email+outbox"
        ctx.publisher("later").publish("queued while SMTP was down")
        assert ctx.outbox_depth() == 1
    assert "cannot reach SMTP server" in caplog.text
    up = mail_stack.smtps_url
    with mailbus.Context(_options(mail_stack, user, up, None)) as reader:
        sub = reader.subscription("later", depth=5)
        with mailbus.Context(_options(mail_stack, user, up, outbox)):
            deadline = time.monotonic() + 30
            message = None
            while message is None and time.monotonic() < deadline:
                message = mailbus.wait_for_message(sub, 0.5)
    assert message is not None and message.body == "queued while SMTP was down"
