"""True raw source through the real Postfix + Dovecot: the received event carries the
bytes the server delivered (Received, Date and all), the workbench's `.eml` export
writes exactly those bytes, the stdlib email package reads them back byte for byte,
the recording's raw column holds them, and no password is in any of it."""

from __future__ import annotations

from email import message_from_bytes
from email.policy import compat32
from pathlib import Path

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory
from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.sessions.reader import open_session
from mailbus.sessions.recorder import Recorder
from mailbus.stacks.mailstack import HOST, MailStack, User
from mailbus.trace import Kind
from mailbus_workbench.model.eml import write_eml
from mailbus_workbench.model.feed import EventFeed
from mailbus_workbench.model.topics import MessageRecord

pytestmark = pytest.mark.mailstack

TOPIC = "lab/raw"
BODY = '{"celsius": 21.5, "note": "grüße"}'  # not ASCII: travels encoded


def delivered(stack: MailStack, user: User, message_id: str) -> bytes:
    """The stored email with this Message-ID, as the server hands it to any reader."""
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    client = imapclient.IMAPClient(HOST, stack.imaps_port, ssl=True, ssl_context=context)
    try:
        client.login(user.address, user.password)
        client.select_folder("INBOX", readonly=True)
        uids = client.search(["HEADER", "Message-ID", message_id])
        assert len(uids) == 1, f"{len(uids)} emails with Message-ID {message_id}"
        return bytes(client.fetch(uids, [b"BODY.PEEK[]"])[uids[0]][b"BODY[]"])
    finally:
        client.logout()


def test_eml_export_is_exactly_what_the_server_delivered(
    tmp_path: Path, smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    feed = EventFeed()
    with mailbus.Context(options_for(user)) as ctx:
        feed.attach(ctx.tracer.add_listener)
        recorder = Recorder(tmp_path / "session", context=ctx)
        sub = ctx.subscription(TOPIC)
        ctx.publisher(TOPIC).publish(BODY)
        message = mailbus.wait_for_message(sub, 30.0)
        recorder.stop()
    assert message is not None and message.body == BODY
    (event,) = [e for e in feed.drain() if e.kind == Kind.RECEIVED]
    server_bytes = delivered(smtp_stack, user, event.message_id)
    assert event.raw == server_bytes

    path, eml = write_eml(tmp_path, MessageRecord(1, event))
    data = path.read_bytes()
    assert eml.exact and data == server_bytes
    # The stdlib reads it as the email it is, and writes back the identical bytes.
    parsed = message_from_bytes(data, policy=compat32)
    again = parsed.as_bytes(policy=compat32.clone(linesep="\r\n"))
    assert again == server_bytes, [
        (a, b)
        for a, b in zip(again.split(b"\r\n"), server_bytes.split(b"\r\n"), strict=False)
        if a != b
    ][:3]
    assert parsed["Message-ID"] == event.message_id and parsed["Subject"] == TOPIC
    assert parsed["Received"] is not None and parsed["Date"] is not None  # the server's
    assert parsed.get_payload(decode=True).decode(parsed.get_content_charset()) == BODY

    rows = open_session(tmp_path / "session").read()
    (recorded,) = rows.filter(rows["kind"] == Kind.RECEIVED.value)["raw"].to_list()
    assert recorded == server_bytes
    secret = user.password.encode()
    assert secret not in data and secret not in recorded
