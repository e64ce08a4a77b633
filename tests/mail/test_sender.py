"""The SMTP sender and the IMAP receiver used on their own: permanent refusals,
closing with mail still pending, a full queue, validation in the caller, IDLE."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from mailbus import headers as H
from mailbus.backoff import Backoff
from mailbus.email_message import Email, to_bytes
from mailbus.errors import InvalidNameError, TransportError
from mailbus.mail import imap_wire
from mailbus.mail.imap_receiver import ImapReceiver, ImapSettings
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.mail.tls import TlsSettings
from mailbus.stacks.mailstack import DEFERRED, REJECTED, MailStack, User, free_port
from mailbus.trace import Tracer
from mailbus.transport import RawEmail
from test_integration import Events
from waiting import Signalled, eventually


def email_to(*to: str, body: str = "hello", sender: str = "me@mailbus.test") -> Email:
    headers = {H.SOURCE_TIMESTAMP: str(time.time_ns()), H.PUBLISHER_GID: "a" * 32}
    return Email(subject="t", body=body, sender=sender, to=to, headers=headers)


def unreachable_sender(**kwargs: Any) -> tuple[SmtpSender, Events]:
    tracer = Tracer()
    events = Events()
    tracer.add_listener(events)
    settings = SmtpSettings(f"smtps://127.0.0.1:{free_port()}", "u@mailbus.test", "pw")
    backoff = Backoff(initial=0.05, maximum=0.1)
    return SmtpSender(settings, tracer, backoff=backoff, **kwargs), events


def test_close_with_the_server_down_reports_what_was_not_sent() -> None:
    sender, events = unreachable_sender()
    for i in range(3):
        sender.send(email_to("a@mailbus.test", body=f"m{i}"))
    assert events.wait_for("mail.send_failed", 2)
    sender.close(timeout=0.3)
    [abandoned] = events.wait_for("mail.send_abandoned")
    assert abandoned.extra["count"] == 3
    assert sender.counters["send_abandoned"] == 3
    with pytest.raises(TransportError, match="closed"):
        sender.send(email_to("a@mailbus.test"))


def test_a_full_queue_refuses_loudly_instead_of_dropping() -> None:
    sender, _ = unreachable_sender(max_pending=2)
    sender.send(email_to("a@mailbus.test"))
    sender.send(email_to("a@mailbus.test"))
    with pytest.raises(TransportError, match="2 emails are waiting"):
        sender.send(email_to("a@mailbus.test"))
    assert sender.counters["send_refused_full"] == 1
    sender.close(timeout=0)


def test_bad_emails_are_refused_in_the_caller() -> None:
    sender, _ = unreachable_sender()
    with pytest.raises(InvalidNameError):
        sender.send(email_to("not an address"))
    with pytest.raises(InvalidNameError):
        sender.send(Email(subject="inject\r\nBcc: x@evil.example", body="b", to=("a@b.c",)))
    with pytest.raises(TransportError, match="no recipients"):
        sender.send(Email(subject="t", body="b"))
    assert sender.pending == 0
    sender.close(timeout=0)


def receiver_for(stack: MailStack, user: User, **kwargs: Any) -> ImapReceiver:
    settings = ImapSettings(
        stack.imaps_url, user.address, user.password, TlsSettings(ca_file=stack.ca_file)
    )
    receiver = ImapReceiver(settings, **kwargs)
    receiver.connect()
    return receiver


def receive_all(receiver: ImapReceiver, count: int, timeout: float = 15.0) -> list[RawEmail]:
    out: list[RawEmail] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        out.extend(i for i in receiver.receive(0.5) if isinstance(i, RawEmail))
    return out


@pytest.mark.mailstack
def test_a_permanent_refusal_is_reported_and_does_not_stall_the_queue(
    smtp_stack: MailStack, user: User
) -> None:
    receiver = receiver_for(smtp_stack, user, period_s=0.01)
    tracer = Tracer()
    events = Events()
    tracer.add_listener(events)
    settings = SmtpSettings(
        smtp_stack.smtps_url, user.address, user.password, TlsSettings(ca_file=smtp_stack.ca_file)
    )
    sender = SmtpSender(settings, tracer)
    sender.check_login()
    sender.send(email_to(REJECTED, sender=user.address, body="refused"))
    sender.send(email_to(user.address, sender=user.address, body="accepted"))
    assert sender.flush(15)
    [rejected] = events.wait_for("mail.send_rejected")
    assert rejected.extra["smtp_code"] == 550
    assert sender.counters["send_rejected"] == 1 and sender.counters["sent"] == 1
    [raw] = receive_all(receiver, 1)
    assert b"accepted" in raw.data and raw.origin.startswith("uid:")
    sender.close()
    receiver.close()


def sender_for(stack: MailStack, user: User, **kwargs: Any) -> tuple[SmtpSender, Events]:
    tracer = Tracer()
    events = Events()
    tracer.add_listener(events)
    settings = SmtpSettings(
        stack.smtps_url, user.address, user.password, TlsSettings(ca_file=stack.ca_file)
    )
    return SmtpSender(settings, tracer, **kwargs), events


def check_one_refused_recipient_does_not_block_the_others(stack: MailStack, user: User) -> None:
    """Shared with the relay stack (test_fallback)."""
    other = stack.add_user()
    receivers = [receiver_for(stack, u, period_s=0.01) for u in (user, other)]
    sender, events = sender_for(stack, user)
    sender.send(email_to(user.address, REJECTED, other.address, sender=user.address, body="3"))
    assert sender.flush(15)
    for receiver in receivers:
        [raw] = receive_all(receiver, 1)
        assert raw.data.rstrip().endswith(b"3")
    [rejected] = events.of("mail.send_rejected")
    assert rejected.extra["recipients"] == [REJECTED] and rejected.extra["smtp_code"] == 550
    assert rejected.extra["delivered_to_others"] is True
    assert REJECTED in str(rejected.detail) and user.address not in str(rejected.detail)
    assert sender.counters["sent"] == 1 and sender.counters["recipients_rejected"] == 1
    assert sender.counters["send_failed"] == 0 and sender.pending == 0
    # The same through send_sync (the durable outbox): it returns, the mail arrives.
    sender.send_sync(email_to(REJECTED, user.address, sender=user.address, body="sync"))
    [raw] = receive_all(receivers[0], 1)
    assert b"sync" in raw.data
    assert [e.extra["recipients"] for e in events.of("mail.send_rejected")] == [[REJECTED]] * 2
    sender.close()
    for receiver in receivers:
        receiver.close()


@pytest.mark.mailstack
def test_one_refused_recipient_does_not_block_the_others(smtp_stack: MailStack, user: User) -> None:
    check_one_refused_recipient_does_not_block_the_others(smtp_stack, user)


@pytest.mark.mailstack
def test_every_recipient_refused_is_one_rejection_naming_them(
    smtp_stack: MailStack, user: User
) -> None:
    sender, events = sender_for(smtp_stack, user)
    both = (REJECTED, REJECTED.upper())
    sender.send(email_to(*both, sender=user.address))
    assert sender.flush(15)
    [rejected] = events.of("mail.send_rejected")
    assert rejected.extra["recipients"] == list(both)
    assert rejected.extra["delivered_to_others"] is False
    assert sender.counters["sent"] == 0 and sender.counters["send_failed"] == 0
    with pytest.raises(TransportError, match="refused every recipient") as caught:
        sender.send_sync(email_to(*both, sender=user.address))
    assert getattr(caught.value, "permanent", None) is True
    sender.close()


@pytest.mark.mailstack
def test_a_deferred_recipient_is_retried_alone(smtp_stack: MailStack, user: User) -> None:
    receiver = receiver_for(smtp_stack, user, period_s=0.01)
    sender, events = sender_for(smtp_stack, user, backoff=Backoff(initial=0.05, maximum=0.1))
    sender.send(email_to(user.address, DEFERRED, sender=user.address, body="later"))
    [raw] = receive_all(receiver, 1)
    assert b"later" in raw.data
    failed = events.wait_for("mail.send_failed", 2)
    assert len(failed) >= 2
    first, second = failed[0], failed[1]
    assert first.extra["smtp_code"] == 450 and first.extra["reason"] == "transient"
    assert DEFERRED in str(first.detail) and user.address not in str(first.detail)
    # After the first attempt only the deferred recipient is left to try: the retries'
    # transactions name it alone, so the others get no second copy.
    assert first.extra["recipients"] == [DEFERRED] == second.extra["recipients"]
    assert second.extra["attempt"] == 2
    assert sender.counters["sent"] == 1 and sender.counters["send_rejected"] == 0
    sender.close(timeout=0)
    [abandoned] = events.wait_for("mail.send_abandoned")
    assert abandoned.extra["count"] == 1
    receiver.close()


@pytest.mark.mailstack
def test_idle_wakes_the_receiver_and_wake_interrupts_idle(
    mail_stack: MailStack, user: User
) -> None:
    # A 30 s period: only IDLE can bring the message within the receive call.
    receiver = receiver_for(mail_stack, user, period_s=30.0, idle="auto", quiet_s=1.0)
    receiver.counters = counters = Signalled(receiver.counters)  # wakes the wait below
    assert receiver.receive(0) == []  # first poll: nothing yet
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.extend(receiver.receive(20.0)))
    thread.start()
    # Deliver once the receiver is idling (mail that arrives between its last poll and
    # the IDLE command is only seen at the next poll, a period later).
    eventually(lambda: counters["idles"] >= 1, 10, "the receiver to idle", wake=counters.changed)
    assert receiver.counters["idles"] == 1
    data = to_bytes(email_to(user.address, sender=user.address, body="via idle"))
    mail_stack.deliver(user.address, data)
    thread.join(20)
    assert len(got) == 1 and b"via idle" in got[0].data
    assert receiver.counters["idle_wakeups"] == 1
    # wake() ends an IDLE wait that would otherwise last the whole period.
    thread = threading.Thread(target=lambda: got.append(receiver.receive(None)))
    thread.start()
    receiver.wake()
    thread.join(10)
    assert not thread.is_alive() and got[-1] == []
    # Mail that arrived while the receiver was not idling is fetched by the poll that
    # precedes every IDLE, at once.
    mail_stack.deliver(user.address, to_bytes(email_to(user.address, body="before idle")))
    [raw] = receiver.receive(20.0)
    assert isinstance(raw, RawEmail) and b"before idle" in raw.data
    assert receiver.counters["idle_wakeups"] == 1
    receiver.close()


@pytest.mark.mailstack
def test_imaplib_untagged_responses_do_not_pile_up(mail_stack: MailStack, user: User) -> None:
    receiver = receiver_for(mail_stack, user, period_s=0.005)
    for i in range(20):
        mail_stack.deliver(user.address, to_bytes(email_to(user.address, body=f"m{i}")))
        assert len(receive_all(receiver, 1)) == 1
    assert imap_wire.untagged_count(receiver._client) <= 2
    receiver.close()


def raw_mail(to: str, subject: str, body: bytes) -> bytes:
    head = f"From: test@mailbus.test\r\nTo: {to}\r\nSubject: {subject}\r\n\r\n"
    return head.encode() + body


@pytest.mark.mailstack
def test_idle_polls_do_not_download_the_newest_mail_again(
    mail_stack: MailStack, user: User
) -> None:
    # `UID FETCH n:*` names the highest message even when nothing is new: with its body
    # in that FETCH every idle poll downloaded the newest mail again (1 MB per 10 ms).
    receiver = receiver_for(mail_stack, user, period_s=0.01, max_message_bytes=2_000_000)
    big = b"\r\n".join([b"y" * 998] * 1000)  # about 1 MB
    mail_stack.deliver(user.address, raw_mail(user.address, "big", big))
    [raw] = receive_all(receiver, 1)
    assert len(raw.data) > 1_000_000
    after_delivery = receiver.counters["bytes_fetched"]
    assert after_delivery >= len(raw.data)  # the counter does count the body
    bodies = receiver.counters["body_bytes_fetched"]
    polls = receiver.counters["polls"]
    for _ in range(30):
        assert receiver.poll() == []
    assert receiver.counters["polls"] == polls + 30
    assert receiver.counters["bytes_fetched"] - after_delivery < 4096
    assert receiver.counters["body_bytes_fetched"] == bodies
    # New mail is still seen, and only its own body is downloaded.
    mail_stack.deliver(user.address, raw_mail(user.address, "small", b"small body"))
    [small] = receive_all(receiver, 1)
    assert b"small body" in small.data
    assert receiver.counters["bytes_fetched"] - after_delivery < 8192
    assert receiver.counters["fetched"] == 2
    receiver.close()


@pytest.mark.mailstack
def test_an_oversized_email_is_refused_reported_and_the_next_one_goes_through(
    smtp_stack: MailStack, user: User
) -> None:
    tracer = Tracer()
    events = Events()
    tracer.add_listener(events)
    settings = SmtpSettings(
        smtp_stack.smtps_url, user.address, user.password, TlsSettings(ca_file=smtp_stack.ca_file)
    )
    sender = SmtpSender(settings, tracer)
    huge = "\n".join(["x" * 900] * 12_000)  # about 10.8 MB, over the stack's 10,240,000
    sender.send(email_to(user.address, sender=user.address, body=huge))
    sender.send(email_to(user.address, sender=user.address, body="small"))
    assert sender.flush(30)
    [rejected] = events.wait_for("mail.send_rejected")
    assert rejected.extra["smtp_code"] == 552
    assert "bytes is over the server's size limit" in rejected.detail  # not "MAIL failed: 552"
    assert sender.counters["sent"] == 1
    sender.close()


def test_concurrent_first_sends_start_one_delivery_thread() -> None:
    def delivery_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "mailbus-smtp"}

    before = delivery_threads()
    sender, _ = unreachable_sender()
    barrier = threading.Barrier(8)

    def send() -> None:
        barrier.wait(5)
        sender.send(email_to("a@mailbus.test"))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sender.pending == 8
    started = delivery_threads() - before
    assert len(started) == 1
    sender.close(timeout=0)
    assert not started.pop().is_alive()


@pytest.mark.mailstack
def test_send_sync_returns_once_accepted_and_marks_refusals_permanent(
    smtp_stack: MailStack, user: User
) -> None:
    receiver = receiver_for(smtp_stack, user, period_s=0.01)
    settings = SmtpSettings(
        smtp_stack.smtps_url, user.address, user.password, TlsSettings(ca_file=smtp_stack.ca_file)
    )
    sender = SmtpSender(settings)
    sender.send_sync(email_to(user.address, sender=user.address, body="synchronous"))
    assert sender.counters["sent"] == 1 and sender.pending == 0
    with pytest.raises(TransportError) as refused:
        sender.send_sync(email_to(REJECTED, sender=user.address))
    assert getattr(refused.value, "permanent", None) is True
    [raw] = receive_all(receiver, 1)
    assert b"synchronous" in raw.data
    sender.close()
    down = SmtpSender(SmtpSettings(f"smtps://127.0.0.1:{free_port()}", user.address, "pw"))
    with pytest.raises(TransportError) as transient:
        down.send_sync(email_to(user.address, sender=user.address))
    assert getattr(transient.value, "permanent", None) is False
    assert down.counters["send_failed"] == 1
    down.close(timeout=0)
    receiver.close()
