"""The mail transport against the real loopback stack, over TLS."""

from __future__ import annotations

import smtplib
import threading
import time
import warnings
from typing import Any

import mailbus
import pytest
from conftest import OptionsFactory
from mailbus.mail.errors import MailConnectError, MailLoginError, MailTLSError
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.mail.tls import InsecureTLSWarning, TlsSettings
from mailbus.stacks.mailstack import MailStack, User, free_port
from mailbus.subscription import Subscription
from mailbus.trace import Kind, TraceEvent

pytestmark = pytest.mark.mailstack


def take(sub: Subscription, count: int, timeout: float = 20.0) -> list[str]:
    bodies: list[str] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count and time.monotonic() < deadline:
        message = mailbus.wait_for_message(sub, min(0.5, deadline - time.monotonic()))
        if message is not None:
            bodies.append(message.body)
    return bodies


class Events:
    """Collects trace events (thread-safe) and waits for one with a deadline."""

    def __init__(self) -> None:
        self.items: list[TraceEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: TraceEvent) -> None:
        with self._cond:
            self.items.append(event)
            self._cond.notify_all()

    def of(self, kind: str) -> list[TraceEvent]:
        with self._cond:
            return [e for e in self.items if e.kind == kind]

    def wait_for(self, kind: str, count: int = 1, timeout: float = 15.0) -> list[TraceEvent]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len([e for e in self.items if e.kind == kind]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return [e for e in self.items if e.kind == kind]


def test_pubsub_over_smtps_and_imaps_on_one_kept_connection(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    with mailbus.Context(options_for(user)) as ctx:
        sub = ctx.subscription("chat", depth=100)
        pub = ctx.publisher("chat")
        sent = [f"hello {i} ünïcode" for i in range(30)]
        for body in sent:
            pub.publish(body)
        got = take(sub, 30)
        assert sorted(got) == sorted(sent)
        sender: Any = ctx.transport.sender
        receiver: Any = ctx.transport.receiver
        # One SMTP connection (opened at init) carried all 30, one IMAP connection read them.
        assert sender.counters["connections_opened"] == 1
        assert sender.counters["sent"] == 30
        assert receiver.counters["connections_opened"] == 1
    assert ctx.counters["received"] == 30


def test_starttls_on_both_sides(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    options = options_for(user, url_smtp=smtp_stack.smtp_url, url_imap=smtp_stack.imap_url)
    with mailbus.Context(options) as ctx:
        sub = ctx.subscription("plain")
        ctx.publisher("plain").publish("over STARTTLS")
        assert take(sub, 1) == ["over STARTTLS"]
    # Postfix allows AUTH only under TLS (smtpd_tls_auth_only): a login on the plain
    # port proves STARTTLS happened. Dovecot marks the IMAP login as TLS.
    postfix_log = smtp_stack.postfix_log.read_text() if smtp_stack.has_postfix else ""
    assert not smtp_stack.has_postfix or any(
        "postfix/smtpd/smtpd" in line and f"sasl_username={user.address}" in line
        for line in postfix_log.splitlines()
    )
    # (Cyrus logs only to syslog; its IMAP side is IMAPS here, TLS from the start.)
    dovecot_log = smtp_stack.dovecot_log.read_text() if smtp_stack.server == "dovecot" else ""
    assert smtp_stack.server != "dovecot" or any(
        f"user=<{user.address}>" in line and "TLS" in line and "Login:" in line
        for line in dovecot_log.splitlines()
    )


def test_one_account_per_participant_response_goes_to_requester(
    smtp_stack: MailStack, options_for: OptionsFactory
) -> None:
    client_user, server_user = smtp_stack.add_user(), smtp_stack.add_user()
    to_server = {"to": [server_user.address]}
    server_ctx = mailbus.Context(options_for(server_user))
    events = Events()  # what a failure prints: what the server's account received
    server_ctx.tracer.add_listener(events)
    with (
        server_ctx,
        mailbus.Context(options_for(client_user, recipients=to_server)) as client_ctx,
    ):
        server = server_ctx.server("add")
        client = client_ctx.client("add")

        def serve() -> None:
            request = mailbus.wait_for_request(server, 20)
            if request is not None:
                a, b = map(int, request.body.split("+"))
                server.send_response(request, str(a + b))

        thread = threading.Thread(target=serve)
        thread.start()
        response = client.call("2+3", timeout=20)
        thread.join(20)
        assert response.body == "5"
        assert response.email.to == (client_user.address,)
        assert response.email.sender == server_user.address
        # The request went only to the server's account, the response only to the client's.
        received = [
            (e.name, e.message_id, e.in_reply_to, e.extra.get("from"), e.extra.get("to"))
            for e in events.of("email.received")
        ]
        assert server_ctx.counters["received"] == 1, received
        assert client_ctx.counters["received"] == 1


def test_start_uid_catches_up_on_backlog_in_batches(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    with mailbus.Context(options_for(user)) as ctx:
        pub = ctx.publisher("backlog")
        sub = ctx.subscription("backlog", depth=100)
        for i in range(25):
            pub.publish(f"old {i}")
        assert len(take(sub, 25)) == 25  # all delivered into the inbox
    late = options_for(user, mail={"start-uid": 1, "batch": 7, "reconnect-max-s": 0.5})
    # Subscribed before the context starts: the backlog comes at its first poll, which
    # under load came before a subscription made after `with` (the first batch of 7 had
    # no subscriber yet).
    ctx = mailbus.Context(late)
    sub = ctx.subscription("backlog", depth=100)
    with ctx:
        got = take(sub, 25)
        assert sorted(got) == sorted(f"old {i}" for i in range(25))
        receiver: Any = ctx.transport.receiver
        assert receiver.counters["fetched"] == 25
        assert receiver.counters["polls"] >= 4  # 25 messages in chunks of 7


NEWSLETTER = (
    b"From: news@shop.example\r\nTo: someone@mailbus.test\r\nSubject: Big sale\r\n"
    b"Message-ID: <n1@shop.example>\r\n\r\nBuy now!\r\n"
)
MALFORMED = b"this is not an email at all, no header block, no blank line\r\n"
BAD_BASE64 = (
    b"From: x@mailbus.test\r\nSubject: t\r\nSource-Timestamp: 1\r\nPublisher-GID: g\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    b"\xff\xfe not base64 at all \x00\r\n"
)


def test_foreign_and_malformed_mail_are_skipped_reported_and_the_stream_goes_on(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    ctx = mailbus.Context(options_for(user))
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        sub = ctx.subscription("t")
        pub = ctx.publisher("t")
        pub.publish("before")
        assert take(sub, 1) == ["before"]
        stored: list[str] = []
        refused: list[bytes] = []
        for reason, raw in (
            ("foreign", NEWSLETTER),
            ("malformed", MALFORMED),
            ("malformed", BAD_BASE64),
        ):
            try:
                smtp_stack.deliver(user.address, raw)
                stored.append(reason)
            except smtplib.SMTPDataError as exc:
                assert exc.smtp_code == 554  # refused for good, loudly, at delivery
                refused.append(raw)
        # Dovecot stores all three; Cyrus refuses at its LMTP door a message without a
        # header block (554 5.6.0 "Message contains invalid header") and one with a NUL.
        assert refused == ([] if smtp_stack.server == "dovecot" else [MALFORMED, BAD_BASE64])
        pub.publish("after")
        assert take(sub, 1) == ["after"]
        skipped = events.wait_for(Kind.SKIPPED, len(stored))
        reasons = sorted(str(e.extra["reason"]) for e in skipped)
        assert reasons == sorted(stored)
        origins = [str(e.extra["origin"]) for e in skipped]
        assert all(o.startswith("uid:") for o in origins) and len(set(origins)) == len(stored)
    assert ctx.counters["foreign"] == 1
    assert ctx.counters["malformed"] == stored.count("malformed")


def test_oversized_mail_is_reported_not_fetched_whole(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    options = options_for(user, mail={"max-message-bytes": 4000, "reconnect-max-s": 0.5})
    ctx = mailbus.Context(options)
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        sub = ctx.subscription("t")
        smtp_stack.deliver(user.address, NEWSLETTER.replace(b"Buy now!", b"x" * 20_000))
        ctx.publisher("t").publish("small")
        assert take(sub, 1) == ["small"]
        [oversized] = events.wait_for("mail.oversized")
        assert str(oversized.extra["origin"]).startswith("uid:")
        assert int(str(oversized.extra["size"])) > 20_000
        # Only its size was asked: the body was not downloaded, not even in part.
        receiver: Any = ctx.transport.receiver
        assert receiver.counters["body_bytes_fetched"] < 4000


def test_wrong_password_is_a_clear_error_at_init(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    options = options_for(user, password="not-the-password")
    with pytest.raises(MailLoginError, match="refused") as info:
        mailbus.Context(options).init()
    assert user.address in str(info.value)
    assert "not-the-password" not in str(info.value)


def test_wrong_smtp_password_is_a_clear_error(smtp_stack: MailStack, user: User) -> None:
    settings = SmtpSettings(
        smtp_stack.smtps_url, user.address, "wrong", TlsSettings(ca_file=smtp_stack.ca_file)
    )
    sender = SmtpSender(settings)
    with pytest.raises(MailLoginError, match="SMTP login"):
        sender.check_login()
    sender.close(timeout=0)


def test_unreachable_server_is_a_clear_error_at_init(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    options = options_for(user, url_imap=f"imaps://127.0.0.1:{free_port()}")
    with pytest.raises(MailConnectError, match="cannot reach IMAP server"):
        mailbus.Context(options).init()


def test_unreachable_smtp_server_is_a_clear_error(mail_stack: MailStack, user: User) -> None:
    settings = SmtpSettings(f"smtps://127.0.0.1:{free_port()}", user.address, user.password)
    sender = SmtpSender(settings)
    with pytest.raises(MailConnectError, match="cannot reach SMTP server"):
        sender.check_login()
    sender.close(timeout=0)


def test_certificate_is_verified_by_default(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    # The system store does not know the test CA: both sides must refuse.
    options = options_for(user, ca_file="")
    with pytest.raises(MailTLSError, match="TLS"):
        mailbus.Context(options).init()
    sender = SmtpSender(SmtpSettings(smtp_stack.smtps_url, user.address, user.password))
    with pytest.raises(MailTLSError, match="TLS"):
        sender.check_login()
    sender.close(timeout=0)


def test_turning_verification_off_warns_every_time(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    options = options_for(user, ca_file="", tls_verify=False)
    for _ in range(2):
        ctx = mailbus.Context(options)
        events = Events()
        ctx.tracer.add_listener(events)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            with ctx:
                sub = ctx.subscription("t")
                ctx.publisher("t").publish("unverified")
                assert take(sub, 1) == ["unverified"]
        # One warning per connection: IMAP and SMTP, in each of the two runs.
        assert len(events.of("mail.tls_unverified")) == 2
        assert sum(issubclass(w.category, InsecureTLSWarning) for w in caught) >= 1


def test_durable_outbox_over_the_real_servers(
    smtp_stack: MailStack, user: User, options_for: OptionsFactory, tmp_path: Any
) -> None:
    # The outbox part wraps this transport's sender and calls its send_sync.
    options = options_for(user, outbox={"dir": str(tmp_path / "outbox")})
    with mailbus.Context(options) as ctx:
        assert ctx.transport.name == "email+outbox"
        sub = ctx.subscription("durable", depth=20)
        pub = ctx.publisher("durable")
        for i in range(10):
            pub.publish(f"d{i}")
        assert sorted(take(sub, 10)) == sorted(f"d{i}" for i in range(10))
