"""At-least-once, end to end: when the outbox cannot know that a send succeeded (killed
right after the server accepted, or the reply was lost), it sends again with the same
Message-ID, and the receiving side drops the copy."""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
from pathlib import Path

import mailbus
from mailbus.email_message import Email, to_bytes
from mailbus.errors import TransportError
from mailbus.inprocess import in_process_transport
from mailbus.options import options_from_mapping
from mailbus.outbox import OutboxSender, RetryPolicy
from mailbus.transport import EmailReceiver, EmailSender, Inbound, RawEmail, Transport
from outbox_support import SmtplibSender, SmtpSink
from waiting import eventually


def test_killed_after_the_server_accepted_the_mail_is_sent_again_with_its_message_id(
    outbox_dir: Path, sink: SmtpSink
) -> None:
    """The one window where SIGKILL makes a copy: after the server's 250, before the
    outbox records the send as done."""
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from outbox_support import SmtplibSender, make_email
        from mailbus.outbox import OutboxSender

        class DieAfterSending(SmtplibSender):
            def deliver(self, email):
                super().deliver(email)
                os.kill(os.getpid(), signal.SIGKILL)

        sender = OutboxSender(DieAfterSending({sink.port}), {str(outbox_dir)!r})
        sender.send(make_email(1, message_id="<twice@outbox.test>"))
        sender.wait_idle(30)
        """
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr
    eventually(lambda: sink.message_ids() == {"<twice@outbox.test>": 1}, 5.0)
    restarted = OutboxSender(SmtplibSender(sink.port), outbox_dir)
    try:
        assert restarted.recovery.inflight_requeued == 1
        assert restarted.wait_idle(10.0)
    finally:
        restarted.close()
    eventually(lambda: sink.message_ids() == {"<twice@outbox.test>": 2}, 5.0)


class MailboxReceiver(EmailReceiver):
    """A mailbox: emails wait in a queue until `receive` takes them, as with IMAP."""

    def __init__(self) -> None:
        self.box: queue.Queue[Inbound | None] = queue.Queue()

    def receive(self, timeout: float | None) -> list[Inbound]:
        try:
            item = self.box.get(timeout=timeout)
        except queue.Empty:
            return []
        return [] if item is None else [item]

    def wake(self) -> None:
        self.box.put(None)


class LosesTheFirstReply(EmailSender):
    """Delivers every email, but reports the first delivery as failed (an SMTP reply lost
    after the server accepted the message)."""

    def __init__(self, box: MailboxReceiver) -> None:
        self.box = box
        self.calls = 0

    def deliver(self, email: Email) -> None:
        self.calls += 1
        self.box.box.put(RawEmail(email.raw or to_bytes(email)))
        if self.calls == 1:
            raise TransportError("connection reset after DATA (test)")


def test_a_subscriber_sees_a_resent_message_once(outbox_dir: Path) -> None:
    receiver = MailboxReceiver()
    lossy = LosesTheFirstReply(receiver)
    policy = RetryPolicy(first_delay_s=0.01, max_delay_s=0.01)
    outbox = OutboxSender(lossy, outbox_dir, policy=policy)
    with mailbus.Context(transport=Transport(outbox, receiver)) as ctx:
        subscription = ctx.subscription("t/dup")
        ctx.publisher("t/dup").publish("once")
        message = mailbus.wait_for_message(subscription, timeout=5.0)
        assert message is not None and message.body == "once"
        eventually(lambda: lossy.calls == 2 and outbox.wait_idle(0.01), 5.0)
        eventually(lambda: ctx.counters["duplicates"] == 1, 5.0)
        assert mailbus.wait_for_message(subscription, timeout=0.2) is None


def test_under_an_outbox_even_the_in_process_transport_drops_the_copy(outbox_dir: Path) -> None:
    plain = in_process_transport()
    lossy = LosesTheFirstInProcess(plain.sender)
    options = options_from_mapping(
        {"outbox": {"dir": str(outbox_dir), "first-delay-s": 0.01, "max-delay-s": 0.01}}
    )
    transport = Transport(lossy, plain.receiver, name="inprocess")
    with mailbus.Context(options, transport=transport) as ctx:
        subscription = ctx.subscription("t/dup")
        ctx.publisher("t/dup").publish("once")
        message = mailbus.wait_for_message(subscription, timeout=5.0)
        assert message is not None and message.body == "once"
        eventually(lambda: lossy.calls == 2, 5.0)
        eventually(lambda: ctx.counters["duplicates"] == 1, 5.0)
        assert mailbus.wait_for_message(subscription, timeout=0.2) is None


class LosesTheFirstInProcess(EmailSender):
    def __init__(self, inner: EmailSender) -> None:
        self.inner = inner
        self.calls = 0

    def deliver(self, email: Email) -> None:
        self.calls += 1
        self.inner.send(email)
        if self.calls == 1:
            raise TransportError("reply lost (test)")
