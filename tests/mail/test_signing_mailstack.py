"""Signed mail through the real Postfix + Dovecot: with `require-signature`, forged mail
that smtplib puts in the shared inbox never reaches a subscription; a signed email with
one header changed by a relay fails verification; a captured signed email sent again is
dropped, also after the subscriber restarted (its state dir remembers); and with
signatures not required, signed and unsigned participants keep talking."""

from __future__ import annotations

import smtplib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory
from mailbus import headers as H
from mailbus.email_message import Email, to_bytes
from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.options import Options
from mailbus.sessions.reader import open_session
from mailbus.sessions.recorder import Recorder
from mailbus.signing.config import key_name
from mailbus.signing.keys import new_ed25519_key, write_private_key
from mailbus.signing.sign import Signer
from mailbus.stacks.mailstack import HOST, MailStack, User
from mailbus.trace import Kind, TraceEvent

pytestmark = pytest.mark.mailstack

DOMAIN = "mailbus.test"
TOPIC = "lab/temperature"


class Events:
    """Trace events of one context, with a bounded wait for a condition on them."""

    def __init__(self) -> None:
        self.items: list[TraceEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: TraceEvent) -> None:
        with self._cond:
            self.items.append(event)
            self._cond.notify_all()

    def skipped(self) -> list[TraceEvent]:
        with self._cond:
            return [e for e in self.items if e.kind == Kind.SKIPPED]

    def received(self) -> list[TraceEvent]:
        with self._cond:
            return [e for e in self.items if e.kind == Kind.RECEIVED]

    def wait(self, condition: Callable[[], bool], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


class Keys:
    """Key pairs of the participants of one test; the keyring trusts them all."""

    def __init__(self, directory: Path, *selectors: str) -> None:
        self.directory = directory
        self.pairs = {selector: new_ed25519_key() for selector in selectors}
        for selector, (private, _) in self.pairs.items():
            write_private_key(directory / f"{selector}.key", private)

    @property
    def keyring(self) -> dict[str, str]:
        return {key_name(s, DOMAIN): record for s, (_, record) in self.pairs.items()}

    def signing(self, selector: str | None, **more: Any) -> dict[str, Any]:
        table: dict[str, Any] = {"keyring": self.keyring, **more}
        if selector is not None:
            table |= {
                "domain": DOMAIN,
                "selector": selector,
                "private-key-file": str(self.directory / f"{selector}.key"),
            }
        return table


def take(sub: mailbus.Subscription, count: int, timeout: float = 30.0) -> list[str]:
    bodies: list[str] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count and time.monotonic() < deadline:
        message = mailbus.wait_for_message(sub, max(0.01, deadline - time.monotonic()))
        if message is not None:
            bodies.append(message.body)
    return bodies


def mailbus_bytes(user: User, body: str) -> bytes:
    """A well-formed Mailbus email as anyone could write it."""
    return to_bytes(
        Email(
            subject=TOPIC,
            body=body,
            sender="stranger@example.org",
            to=(user.address,),
            headers={H.SOURCE_TIMESTAMP: str(time.time_ns()), H.PUBLISHER_GID: "f" * 32},
        )
    )


def smtp_send(stack: MailStack, user: User, data: bytes) -> None:
    """Into the inbox by plain SMTP, as a stranger or a relay would."""
    with smtplib.SMTP(HOST, stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail("stranger@example.org", [user.address], data)


def captured(stack: MailStack, user: User, body: str) -> bytes:
    """The bytes of the stored email whose body is `body`, as anyone who can read the
    mailbox (or the wire) would have them."""
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    client = imapclient.IMAPClient(HOST, stack.imaps_port, ssl=True, ssl_context=context)
    try:
        client.login(user.address, user.password)
        client.select_folder("INBOX", readonly=True)
        for data in client.fetch(client.search("ALL"), [b"BODY.PEEK[]"]).values():
            raw = bytes(data[b"BODY[]"])
            if raw.rstrip().endswith(body.encode()):
                return raw
        raise AssertionError(f"no email with body {body!r} in the inbox")
    finally:
        client.logout()


def test_forged_mail_never_reaches_a_subscription_under_require_signature(
    tmp_path: Path, mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    keys = Keys(tmp_path, "alice", "bob")
    alice = options_for(user, signing=keys.signing("alice"))
    bob = options_for(user, signing=keys.signing("bob", **{"require-signature": True}))
    forger_key, _ = new_ed25519_key()
    events = Events()
    with mailbus.Context(bob) as bob_ctx, mailbus.Context(alice) as alice_ctx:
        bob_ctx.tracer.add_listener(events)
        sub = bob_ctx.subscription(TOPIC)
        # 1: unsigned; 2: signed with the forger's key in Alice's name; 3: under a
        # selector nobody trusts.
        smtp_send(mail_stack, user, mailbus_bytes(user, "forged unsigned"))
        smtp_send(
            mail_stack,
            user,
            Signer(forger_key, "alice", DOMAIN).sign(mailbus_bytes(user, "forged as alice")),
        )
        smtp_send(
            mail_stack,
            user,
            Signer(forger_key, "mallory", DOMAIN).sign(mailbus_bytes(user, "forged mallory")),
        )
        alice_ctx.publisher(TOPIC).publish("from alice")
        assert take(sub, 1) == ["from alice"]
        assert events.wait(lambda: len(events.skipped()) >= 3)
        assert mailbus.wait_for_message(sub, 0.5) is None  # nothing else came through
        skipped = {e.extra["reason"]: e.detail for e in events.skipped()}
        received = [e.extra["signature"] for e in events.received()]
    assert skipped.keys() == {"unsigned", "bad_signature"}
    assert skipped["unsigned"] == "unsigned: the email has no DKIM signature"
    details = sorted(e.detail for e in events.skipped() if e.extra["reason"] == "bad_signature")
    assert details == [
        "bad signature: no key for mallory._domainkey.mailbus.test in the keyring",
        "bad signature: signature by alice._domainkey.mailbus.test does not verify "
        "(a signed header was changed)",
    ]
    assert received == ["verified"]
    assert bob_ctx.counters["unsigned"] == 1 and bob_ctx.counters["bad_signature"] == 2


def test_altered_in_transit_fails_and_a_replay_is_dropped_also_after_a_restart(
    tmp_path: Path, mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    keys = Keys(tmp_path, "alice", "bob")
    alice = options_for(user, signing=keys.signing("alice"))
    bob_signing = keys.signing(
        "bob", **{"require-signature": True, "state-dir": str(tmp_path / "bob-state")}
    )
    bob = options_for(user, signing=bob_signing)
    events = Events()
    with mailbus.Context(alice) as alice_ctx:
        publisher = alice_ctx.publisher(TOPIC)
        with mailbus.Context(bob) as bob_ctx:
            bob_ctx.tracer.add_listener(events)
            sub = bob_ctx.subscription(TOPIC)
            publisher.publish("21 celsius")
            assert take(sub, 1) == ["21 celsius"]
            original = captured(mail_stack, user, "21 celsius")
            assert original.count(b"DKIM-Signature:") == 1
            # The relay refreshes the timestamp (to beat the age window): one header edited.
            fresh = str(time.time_ns()).encode()
            start = original.index(b"Source-Timestamp: ") + len(b"Source-Timestamp: ")
            end = original.index(b"\r\n", start)
            altered = original[:start] + fresh + original[end:]
            assert altered != original
            smtp_send(mail_stack, user, altered)
            # The capture as it was, again: the engine has seen its Message-ID.
            smtp_send(mail_stack, user, original)
            assert events.wait(lambda: len(events.skipped()) >= 2)
            assert mailbus.wait_for_message(sub, 0.5) is None
        first_run = events.skipped()
        events = Events()
        with mailbus.Context(bob) as bob_ctx:  # restarted: same state dir
            bob_ctx.tracer.add_listener(events)
            sub = bob_ctx.subscription(TOPIC)
            smtp_send(mail_stack, user, original)
            publisher.publish("22 celsius")
            assert take(sub, 1) == ["22 celsius"]
            assert events.wait(lambda: len(events.skipped()) >= 1)
            assert mailbus.wait_for_message(sub, 0.5) is None
            after_restart = events.skipped()
    reasons = sorted((e.extra or {}).get("reason", e.detail) for e in first_run)
    assert reasons == ["bad_signature", "duplicate"]
    [bad] = [e for e in first_run if e.extra]
    assert bad.detail == (
        "bad signature: signature by alice._domainkey.mailbus.test does not verify "
        "(a signed header was changed)"
    )
    [replayed] = after_restart
    assert replayed.extra["reason"] == "replayed"
    assert replayed.detail.startswith("replayed: Message-ID <")
    assert replayed.detail.endswith("> was taken already")


def test_mixed_signed_and_unsigned_participants_without_require_signature(
    tmp_path: Path, user: User, options_for: OptionsFactory
) -> None:
    keys = Keys(tmp_path, "alice")
    signed_sender = options_for(user, signing=keys.signing("alice"))
    plain_sender = options_for(user)
    checking: Options = options_for(user, signing=keys.signing(None))
    unaware = options_for(user)  # knows nothing of signatures
    events = Events()
    with (
        mailbus.Context(checking) as checking_ctx,
        Recorder(tmp_path / "rec", context=checking_ctx) as recorder,
        mailbus.Context(unaware) as unaware_ctx,
        mailbus.Context(signed_sender) as signed_ctx,
        mailbus.Context(plain_sender) as plain_ctx,
    ):
        checking_ctx.tracer.add_listener(events)
        subs = [checking_ctx.subscription(TOPIC), unaware_ctx.subscription(TOPIC)]
        signed_ctx.publisher(TOPIC).publish("signed")
        plain_ctx.publisher(TOPIC).publish("plain")
        for sub in subs:
            assert sorted(take(sub, 2)) == ["plain", "signed"]
        unaware_ctx.publisher(TOPIC).publish("reply")
        for sub in subs:
            assert take(sub, 1) == ["reply"]
        statuses = {e.body: e.extra["signature"] for e in events.received()}
        recorder.stop()
    assert statuses == {"signed": "verified", "plain": "unsigned", "reply": "unsigned"}
    assert checking_ctx.counters["unsigned"] == 0  # counted as skips only when required
    # The recording keeps each email's status in its own column.
    frame = open_session(tmp_path / "rec").read()
    received = frame.filter(frame["kind"] == "email.received")
    assert sorted(zip(received["body"].cast(str), received["signature"], strict=True)) == [
        ("plain", "unsigned"),
        ("reply", "unsigned"),
        ("signed", "verified"),
    ]
    assert frame.filter(frame["kind"] != "email.received")["signature"].null_count() == (
        frame.height - received.height
    )


def test_services_over_signed_mail_and_a_forged_request_never_reaches_the_server(
    tmp_path: Path, mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    keys = Keys(tmp_path, "server", "client")
    required = {"require-signature": True}
    events = Events()
    with (
        mailbus.Context(options_for(user, signing=keys.signing("server", **required))) as srv,
        mailbus.Context(options_for(user, signing=keys.signing("client", **required))) as cli,
    ):
        srv.tracer.add_listener(events)
        server = srv.server("add")
        client = cli.client("add")
        forged = to_bytes(
            Email(
                subject="add",
                body="40+2",
                sender="stranger@example.org",
                to=(user.address,),
                headers={
                    H.SOURCE_TIMESTAMP: str(time.time_ns()),
                    H.CLIENT_GID: "f" * 32,
                    H.REQUEST_SEQUENCE_NUMBER: "1",
                },
            )
        )
        smtp_send(mail_stack, user, forged)
        assert events.wait(lambda: len(events.skipped()) >= 1)
        assert mailbus.wait_for_request(server, 0.3) is None

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
    [skipped] = events.skipped()
    assert skipped.extra["reason"] == "unsigned"
    statuses = {e.name: e.extra["signature"] for e in events.received()}
    assert statuses == {"add": "verified"}
    assert srv.counters["unsigned"] == 1


def test_the_durable_outbox_sends_signed_mail(
    tmp_path: Path, user: User, options_for: OptionsFactory
) -> None:
    keys = Keys(tmp_path, "robot")
    options = options_for(
        user,
        outbox={"dir": str(tmp_path / "outbox")},
        signing=keys.signing("robot", **{"require-signature": True}),
    )
    events = Events()
    with mailbus.Context(options) as ctx:
        assert ctx.transport.name == "email+outbox"
        ctx.tracer.add_listener(events)
        sub = ctx.subscription(TOPIC, depth=10)
        for i in range(3):
            ctx.publisher(TOPIC).publish(f"d{i}")
        assert sorted(take(sub, 3)) == ["d0", "d1", "d2"]
    assert [e.extra["signature"] for e in events.received()] == ["verified"] * 3
    assert events.skipped() == []
