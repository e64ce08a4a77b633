"""Faults on a stack of its own (so stopping servers disturbs no other test): Dovecot
stopped mid-stream and restarted, Postfix stopped and restarted, servers that answer
garbage."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import imapclient
import mailbus
import pytest
from conftest import make_options
from mailbus import headers as H
from mailbus.email_message import Email, from_bytes, to_bytes
from mailbus.mail.errors import MailConnectError
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.stacks.mail_servers import new_mail_stack
from mailbus.stacks.mailstack import MailStack, User
from test_integration import Events, take

pytestmark = pytest.mark.mailstack


def diagnose(stack: MailStack, events: Events) -> str:
    """What a failed fault test prints: the transport's events and the servers' logs."""
    lines = [f"{e.kind}: {e.detail} {dict(e.extra)}" for e in events.items]
    kept = [line for line in lines if line.startswith(("mail.", "email.skipped", "error"))]
    return "\n".join(kept[-40:]) + "\n" + stack.logs()


def _body(data: bytes) -> str:
    try:
        return from_bytes(data).body
    except Exception as exc:  # a diagnosis never fails on a file it cannot parse
        return f"<{type(exc).__name__}>"


def diagnose_missing(
    stack: MailStack,
    events: Events,
    user: User,
    expected: list[str],
    got: list[str],
    uids: list[str],
) -> str:
    """Which messages are missing and where they are: in Dovecot's maildir (so the
    receiver skipped them) or still in Postfix's queue (so they were never delivered)."""
    missing = sorted(set(expected) - set(got))
    twice = sorted({b for b in got if got.count(b) > 1})
    files = [f"  {sub}/{name}: {_body(data)}" for sub, name, data in stack.maildir_files(user)]
    return "\n".join(
        [
            f"missing: {missing}; received twice: {twice}",
            f"UIDs the receiver fetched, in order: {uids}",
            "maildir (folder/file: body):",
            *files,
            "dovecot-uidlist:",
            stack.uidlist(user),
            "postfix queue:",
            stack.postfix_queue(),
            "postfix log of what is queued:",
            stack.postfix_log_of_queue(),
            diagnose(stack, events),
        ]
    )


class FetchLog:
    """Wraps the receiver's poll() to record the UIDs each poll returned."""

    def __init__(self, receiver: Any) -> None:
        self.origins: list[str] = []
        receiver = getattr(receiver, "imap", receiver)  # the shared receiver's connection
        self._poll = receiver.poll
        receiver.poll = self

    def __call__(self) -> Any:
        items = self._poll()
        self.origins.extend(getattr(item, "origin", "?") for item in items)
        return items


@pytest.fixture(scope="module")
def own_stack(mail_server: str) -> Iterator[MailStack]:
    """A stack of the test's server that these tests may stop and start."""
    with new_mail_stack(mail_server) as stack:
        yield stack


@pytest.fixture
def running(own_stack: MailStack) -> Iterator[MailStack]:
    """The stack, with both servers running again after the test whatever happened."""
    yield own_stack
    own_stack.start_imap()
    own_stack.start_smtp()


def test_dovecot_stopped_mid_stream_resumes_nothing_lost_nothing_twice(running: MailStack) -> None:
    user = running.add_user()
    ctx = mailbus.Context(make_options(running, user))
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        receiver: Any = ctx.transport.receiver
        fetch_log = FetchLog(receiver)
        sub = ctx.subscription("stream", depth=100)
        pub = ctx.publisher("stream")
        for i in range(20):
            pub.publish(f"m{i}")  # queued at once; the sender thread streams them
        first = take(sub, 3)
        assert len(first) == 3
        # Stop Dovecot while the stream is under way: Postfix keeps what it cannot
        # deliver over LMTP, the receiver loses its connection.
        running.stop_imap()
        events.wait_for("mail.disconnected")
        for i in range(20, 30):
            pub.publish(f"m{i}")
        events.wait_for("mail.reconnect_failed")
        running.start_imap()
        # Postfix retries what it deferred within seconds (see the backoff in
        # mailstack.py): wait, bounded, until it has handed everything to Dovecot,
        # then for the receiver to read it.
        drained = running.wait_for_empty_queue(timeout=40)
        rest = take(sub, 27, timeout=20)
        expected = [f"m{i}" for i in range(30)]
        assert sorted(first + rest) == sorted(expected), (
            f"Postfix queue drained: {drained}\n"
            + diagnose_missing(running, events, user, expected, first + rest, fetch_log.origins)
        )
        # No UID is fetched twice. Dovecot may hold a second copy of a message whose
        # LMTP reply was lost when it stopped (Postfix then delivered it again): the
        # engine drops that copy by its Message-ID.
        assert receiver.counters["fetched"] == 30 + ctx.counters.get("duplicates", 0)
        assert receiver.counters["connections_opened"] >= 2
    assert ctx.counters["received"] == 30


def test_postfix_stopped_sends_fail_loudly_and_are_retried(running: MailStack) -> None:
    user = running.add_user()
    ctx = mailbus.Context(make_options(running, user))
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        sub = ctx.subscription("t", depth=100)
        pub = ctx.publisher("t")
        pub.publish("before")
        assert take(sub, 1) == ["before"]
        running.stop_smtp()
        started = time.monotonic()
        for i in range(5):
            pub.publish(f"during {i}")  # returns at once: the sender thread delivers
        assert time.monotonic() - started < 5  # publish never waited on the network
        failures = events.wait_for("mail.send_failed", 2)
        assert len(failures) >= 2
        assert all(f.extra["reason"] == "transient" for f in failures)
        assert failures[0].detail.startswith("send to smtps://")
        sender: Any = ctx.transport.sender
        assert sender.counters["send_failed"] >= 2
        assert sender.pending == 5
        running.start_smtp()
        during = sorted(take(sub, 5, timeout=30))
        assert during == [f"during {i}" for i in range(5)], diagnose(running, events)
        assert sender.flush(10)
        assert sender.counters["sent"] == 6
        # The connection Postfix dropped was replaced by a new one.
        assert sender.counters["connections_opened"] >= 2
    assert ctx.counters["received"] == 6


class GarbageServer:
    """Accepts connections on loopback and answers each with a line of garbage."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.sendall(b"\x00\xffGARBAGE not a mail server\r\n")
                    conn.recv(1024)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_garbage_from_an_imap_port_is_a_clear_error(running: MailStack) -> None:
    garbage = GarbageServer()
    try:
        user = running.add_user()
        options = make_options(running, user, url_imap=f"imap://127.0.0.1:{garbage.port}")
        with pytest.raises(MailConnectError, match="does not speak IMAP"):
            mailbus.Context(options).init()
    finally:
        garbage.close()


def test_garbage_from_an_smtp_port_is_a_clear_error(running: MailStack) -> None:
    garbage = GarbageServer()
    try:
        settings = SmtpSettings(
            f"smtp://127.0.0.1:{garbage.port}", "u@mailbus.test", "pw", connect_timeout_s=2
        )
        sender = SmtpSender(settings)
        with pytest.raises(MailConnectError, match="SMTP server"):
            sender.check_login()
        sender.close(timeout=0)
    finally:
        garbage.close()


def _mailbus_email(user: User, body: str) -> bytes:
    email = Email(
        subject="work",
        body=body,
        sender=user.address,
        to=(user.address,),
        headers={H.SOURCE_TIMESTAMP: str(time.time_ns()), H.PUBLISHER_GID: "g" * 32},
    )
    return to_bytes(email)


def _admin(stack: MailStack, user: User) -> imapclient.IMAPClient:
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    client = imapclient.IMAPClient("127.0.0.1", stack.imaps_port, ssl=True, ssl_context=context)
    client.login(user.address, user.password)
    return client


@pytest.mark.parametrize("mail_server", ["dovecot"], indirect=True)  # removes its maildir
def test_uidvalidity_change_rereads_the_recreated_mailbox(running: MailStack) -> None:
    user = running.add_user()
    admin = _admin(running, user)
    admin.create_folder("Work")
    options = make_options(running, user, mail={"mailbox": "Work", "reconnect-max-s": 0.3})
    ctx = mailbus.Context(options)
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        sub = ctx.subscription("work")
        admin.append("Work", _mailbus_email(user, "first"))
        assert take(sub, 1) == ["first"]
        admin.logout()
        # Recreate the mailbox while no session has it open (Dovecot stopped): it gets
        # a new UIDVALIDITY and its first message UID 1 again.
        running.stop_imap()
        events.wait_for("mail.disconnected")
        shutil.rmtree(running.dovecot_dir / "mail" / user.address / ".Work")
        running.start_imap()
        admin = _admin(running, user)
        admin.create_folder("Work")
        admin.append("Work", _mailbus_email(user, "second"))
        assert take(sub, 1, timeout=20) == ["second"]
        [changed] = events.wait_for("mail.uidvalidity_changed")
        assert changed.extra["old"] != changed.extra["new"]
    admin.logout()
