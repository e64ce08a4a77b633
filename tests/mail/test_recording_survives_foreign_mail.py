"""The exact foreign email that once killed `mailbus record` (a Source-Timestamp of 1
followed by 30 zeros), sent by smtplib through the real Postfix into the shared inbox in
the middle of a recording: it is skipped with a reason naming the header, and the six
real messages around it are all recorded."""

from __future__ import annotations

import smtplib
import time
from pathlib import Path

import mailbus
import pytest
from conftest import OptionsFactory
from mailbus.sessions.reader import open_session
from mailbus.sessions.recorder import Recorder
from mailbus.stacks.mailstack import HOST, MailStack, User

pytestmark = pytest.mark.mailstack

FOREIGN = (
    "From: stranger@example.org\r\n"
    "To: {to}\r\n"
    "Subject: lab/temperature\r\n"
    "Message-ID: <foreign-1@example.org>\r\n"
    "Source-Timestamp: 1000000000000000000000000000000\r\n"
    "Publisher-GID: 0123456789abcdef\r\n"
    "\r\n"
    '{{"celsius": 99}}\r\n'
)


def test_one_foreign_email_costs_a_recording_nothing(
    tmp_path: Path, mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    with mailbus.Context(options_for(user)) as ctx:
        recorder = Recorder(tmp_path / "rec", context=ctx)
        sub = ctx.subscription("lab/temperature")
        publisher = ctx.publisher("lab/temperature")
        for i in range(3):
            publisher.publish(f'{{"celsius": {20 + i}}}')
        port = mail_stack.smtp_port
        with smtplib.SMTP(HOST, port, timeout=30) as smtp:
            smtp.sendmail("stranger@example.org", [user.address], FOREIGN.format(to=user.address))
        for i in range(3, 6):
            publisher.publish(f'{{"celsius": {20 + i}}}')
        bodies = []
        deadline = time.monotonic() + 60
        while len(bodies) < 6 and time.monotonic() < deadline:
            message = mailbus.wait_for_message(sub, max(0.01, deadline - time.monotonic()))
            if message is not None:
                bodies.append(message.body)
        skipped_by_then = ctx.counters["foreign"]
        deadline = time.monotonic() + 30
        while ctx.counters["foreign"] < 1 and time.monotonic() < deadline:
            mailbus.wait_for_message(sub, 0.1)  # the foreign one may come after the last real
        manifest = recorder.stop()
    assert sorted(bodies) == sorted(f'{{"celsius": {20 + i}}}' for i in range(6))
    assert max(skipped_by_then, ctx.counters["foreign"]) == 1
    assert manifest["status"] == "complete", manifest
    frame = open_session(tmp_path / "rec").read()
    delivered = frame.filter(frame["kind"] == "message.delivered")
    assert delivered.height == 6
    skipped = frame.filter(frame["kind"] == "email.skipped")
    assert skipped.height == 1 and "Source-Timestamp" in skipped["detail"][0]
