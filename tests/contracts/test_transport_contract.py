"""One contract for every transport (after harlequin's adapter tests):
the same tests run over the in-process transport, the outbox-wrapped sender, the
PostOffice daemon and real email (Dovecot + Postfix on loopback, marker mailstack).
What a transport does beyond the contract stays in its own area's tests.

Size limits, as each transport declares them (`Subject.limit`):
- in-process and outbox-wrapped in-process: unbounded (objects are handed over, nothing
  is framed); the suite says so and checks that a large message passes whole;
- PostOffice: the daemon's `max_letter_bytes` (`--max-letter-bytes`). The sender queues
  (postoffice.background); the daemon refuses the letter with DELFAIL and the sender
  reports `postoffice.send_failed` with the message's id;
- email: the receiver's `[mail] max-message-bytes`. The mail is skipped unread and
  reported as `mail.oversized` (its UID and size). SMTP's SIZE (Postfix's
  `message_size_limit`, 10 MB in the stack) is a sender matter, tested in tests/mail."""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus.email_message import Email, from_bytes, new_message_id, to_bytes, validate
from mailbus.errors import InvalidNameError, TransportError
from mailbus.event_kind import EventKind
from mailbus.inprocess import in_process_transport
from mailbus.mail.kinds import MailKind
from mailbus.options import options_from_mapping
from mailbus.outbox import OutboxSender
from mailbus.postoffice.kinds import PostOfficeKind
from mailbus.trace import TraceEvent, Tracer
from mailbus.transport import Inbound, RawEmail, Transport
from waiting import eventually

WAIT_S = 30.0  # bound of every wait; a healthy transport answers far sooner
LIMIT = 16 * 1024  # the size limit the bounded transports are given here
UNBOUNDED_PROBE = 1024 * 1024  # what an unbounded transport must carry whole
LINE = "x" * 70 + "\n"  # 72 bytes once the newline travels as CRLF


class Limit:
    """A transport's declared size limit and the trace event that names what is over it."""

    def __init__(
        self,
        max_bytes: int,
        kind: EventKind,
        names: Callable[[TraceEvent, Email], bool],
        *,
        says_limit: bool,
    ) -> None:
        self.max_bytes = max_bytes
        self.kind = kind
        self.names = names  # whether an event of `kind` names this email
        # Whether the event's detail names the limit. The PostOffice's does not: the
        # daemon answers DELFAIL without a reason (docs/postoffice.md, response codes).
        self.says_limit = says_limit


class Subject:
    """A transport under contract and the address its own receiver reads."""

    def __init__(
        self,
        transport: Transport,
        address: str,
        inject: Callable[[bytes], None],
        *,
        tracer: Tracer | None = None,
        limit: Limit | None = None,
        in_order: bool = True,
    ) -> None:
        self.transport = transport
        self.address = address
        self.inject = inject  # puts raw bytes where the receiver reads, past the sender
        self.tracer = tracer or Tracer()  # the one the transport reports to
        self.limit = limit  # None: declared unbounded
        self.in_order = in_order  # whether the transport keeps the sending order

    def email(self, body: str, **kwargs: Any) -> Email:
        return Email("contract/letter", body, to=(self.address,), **kwargs)

    def sized_email(self, size: int) -> Email:
        """An email whose bytes (`to_bytes`, what a transport sends) are `size` long: a
        7bit body of short lines, so that every body byte is one wire byte."""

        def make(body_bytes: int) -> Email:
            lines, rest = divmod(body_bytes, len(LINE) + 1)
            if rest == 0:  # a body ending in a newline would travel as base64
                lines, rest = lines - 1, len(LINE) + 1
            body = LINE * lines + "x" * rest
            return self.email(body, message_id=new_message_id())

        headers = len(to_bytes(make(100))) - 100
        email = make(size - headers)
        assert len(to_bytes(email)) == size, "the padding does not add up"
        return email

    def receive_bodies(self, count: int) -> list[str]:
        """The bodies of the next `count` emails, in the order they were handed over."""
        got: list[str] = []

        def more() -> bool:
            got.extend(_parsed(i).body for i in self.transport.receiver.receive(0.2))
            return len(got) >= count

        eventually(more, WAIT_S, f"{count} emails")
        return got


def _parsed(item: Inbound) -> Email:
    return from_bytes(item.data) if isinstance(item, RawEmail) else item


def _message_id_named(event: TraceEvent, email: Email) -> bool:
    return event.message_id == email.message_id


def _uid_over_limit(event: TraceEvent, email: Email) -> bool:
    # Skipped unread, the mail is known by its UID and size only (and the detail says
    # which limit it is over).
    size = event.extra.get("size")
    origin = str(event.extra.get("origin", ""))
    return isinstance(size, int) and size > LIMIT and origin.startswith("uid:")


def _inprocess(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    transport = in_process_transport()
    yield Subject(transport, "me@inprocess", transport.receiver.push_raw)  # type: ignore[attr-defined]


def _outbox(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    inner = in_process_transport()
    sender = OutboxSender(inner.sender, tmp_path / "outbox")
    transport = Transport(sender, inner.receiver, name="outbox")
    yield Subject(transport, "me@inprocess", inner.receiver.push_raw)  # type: ignore[attr-defined]


def _postoffice(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    from mailbus.postoffice.client import PostOfficeClient
    from mailbus.postoffice.server import ServerConfig, ServerThread
    from mailbus.postoffice.store import HashParams
    from mailbus.postoffice.transport import create_transport

    config = ServerConfig(
        store_path=tmp_path / "store" / "postoffice.db",
        port=0,
        hash_params=HashParams(log2_n=8, r=8, p=1),  # cheap scrypt for tests
        auth_delay_s=0.01,
        auth_delay_max_s=0.05,
        comm_timeout_s=5.0,
        max_letter_bytes=LIMIT,
    )
    server = ServerThread(config).start()
    try:
        table = {"port": server.port, "box": "contract.me", "password": "pw"}
        options = options_from_mapping({"transport": "postoffice", "postoffice": table})
        tracer = Tracer()
        transport = create_transport(options, tracer)

        def inject(data: bytes) -> None:
            client = PostOfficeClient("127.0.0.1", server.port, timeout=10.0)
            try:
                with contextlib.suppress(Exception):  # made by an earlier injection
                    client.create_box("junk", "pw")
                client.check_out("junk", "pw")
                client.send("contract.me", data)
            finally:
                client.close()

        limit = Limit(LIMIT, PostOfficeKind.SEND_FAILED, _message_id_named, says_limit=False)
        yield Subject(transport, "contract.me@postoffice", inject, tracer=tracer, limit=limit)
    finally:
        server.stop()


def _email(
    tmp_path: Path, request: pytest.FixtureRequest, share: str = "none"
) -> Iterator[Subject]:
    from mailbus.mail.transport import create_transport

    stack = request.getfixturevalue("mail_stack")
    user = stack.add_user()
    raw = {
        "transport": "email",
        "url-smtp": stack.smtps_url,
        "url-imap": stack.imaps_url,
        "username": user.address,
        "password": user.password,
        "ca-file": stack.ca_file,
        "polling-period-ms": 10,
        "recipients": {"to": [user.address]},
        "mail": {"reconnect-max-s": 0.5, "share": share, "max-message-bytes": LIMIT},
    }
    options = options_from_mapping(raw, {})
    # share = "process": the subject joins a receiver another transport holds, so what
    # is under contract is the per-context handle of a really shared connection.
    sibling = create_transport(options, Tracer()) if share == "process" else None
    tracer = Tracer()
    transport = create_transport(options, tracer)
    if sibling is None:
        transport.receiver.connect()  # type: ignore[attr-defined]
    # A mail server may deliver a burst in any order (docs/mail.md, "Delivery order").
    inject = functools.partial(stack.deliver, user.address)
    limit = Limit(LIMIT, MailKind.OVERSIZED, _uid_over_limit, says_limit=True)
    try:
        yield Subject(transport, user.address, inject, tracer=tracer, limit=limit, in_order=False)
    finally:
        if sibling is not None:
            sibling.close()


def _email_relay(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    """Email received through the host relay (`share = "relay"`), the relay on a thread."""
    from mailbus.mail.relay.server import MailRelay
    from mailbus.mail.transport import create_transport, mail_section

    stack = request.getfixturevalue("mail_stack")
    user = stack.add_user()
    socket = tmp_path / "relay.sock"
    raw = {
        "transport": "email",
        "url-smtp": stack.smtps_url,
        "url-imap": stack.imaps_url,
        "username": user.address,
        "password": user.password,
        "ca-file": stack.ca_file,
        "recipients": {"to": [user.address]},
        "mail": {
            "reconnect-max-s": 0.5,
            "share": "relay",
            "relay-socket": str(socket),
            "max-message-bytes": LIMIT,
        },
    }
    options = options_from_mapping(raw, {})
    # The relay reads the inbox, so an oversized mail is skipped and reported there.
    tracer = Tracer()
    relay = MailRelay(options, mail_section(options), socket, tmp_path / "state", tracer=tracer)
    ready = threading.Event()
    thread = threading.Thread(target=relay.run, args=(ready.set,), daemon=True)
    thread.start()
    try:
        assert ready.wait(WAIT_S), "the relay did not start"
        transport = create_transport(options, Tracer())
        inject = functools.partial(stack.deliver, user.address)
        limit = Limit(LIMIT, MailKind.OVERSIZED, _uid_over_limit, says_limit=True)
        yield Subject(transport, user.address, inject, tracer=tracer, limit=limit, in_order=False)
    finally:
        relay.stop()
        thread.join(WAIT_S)


MAKERS: dict[str, Callable[[Path, pytest.FixtureRequest], Iterator[Subject]]] = {
    "inprocess": _inprocess,
    "outbox": _outbox,
    "postoffice": _postoffice,
    "email": _email,
    "email-shared": functools.partial(_email, share="process"),
    "email-relay": _email_relay,
}


@pytest.fixture(
    params=[
        "inprocess",
        "outbox",
        "postoffice",
        pytest.param("email", marks=pytest.mark.mailstack),
        pytest.param("email-shared", marks=pytest.mark.mailstack),
        pytest.param("email-relay", marks=pytest.mark.mailstack),
    ]
)
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    made = MAKERS[request.param](tmp_path, request)
    subject = next(made)
    try:
        yield subject
    finally:
        subject.transport.close()
        next(made, None)


def test_what_is_sent_is_received_whole_and_in_order(subject: Subject) -> None:
    bodies = [f"letter {n}: ünïcødé and a\nsecond line" for n in range(5)]
    for body in bodies:
        subject.transport.sender.send(subject.email(body))
    got = [b.rstrip("\n") for b in subject.receive_bodies(len(bodies))]
    assert got == bodies if subject.in_order else sorted(got) == bodies


def test_a_wake_before_the_wait_is_not_lost(subject: Subject) -> None:
    receiver = subject.transport.receiver
    subject.transport.receiver.wake()
    results: list[list[Inbound]] = []
    thread = threading.Thread(target=lambda: results.append(receiver.receive(WAIT_S * 4)))
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "wake() before receive() was lost"
    assert results == [[]]


def test_header_injection_is_refused_before_anything_is_sent(subject: Subject) -> None:
    evil = subject.email("evil", headers={"X-Note": "a\r\nBcc: victim@example.org"})
    with pytest.raises(InvalidNameError, match="X-Note"):
        subject.transport.sender.send(evil)
    subject.transport.sender.send(subject.email("after"))
    assert [b.rstrip("\n") for b in subject.receive_bodies(1)] == ["after"]


def count_validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The subjects of the emails validated from now on in the calling thread (every
    module's reference to `validate` is wrapped)."""
    calls: list[str] = []
    caller = threading.get_ident()
    original = validate

    def counting(email: Email) -> None:
        if threading.get_ident() == caller:
            calls.append(email.subject)
        original(email)

    for module in list(sys.modules.values()):
        if vars(module).get("validate") is original:
            monkeypatch.setattr(module, "validate", counting)
    return calls


def test_an_email_is_validated_once_on_its_way_out(
    subject: Subject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One place validates, for every transport: the same rules, paid for once by the
    caller. (The outbox checks again what it reads back from disk, in its own thread.)"""
    calls = count_validations(monkeypatch)
    subject.transport.sender.send(subject.email("once"))
    assert [b.rstrip("\n") for b in subject.receive_bodies(1)] == ["once"]
    assert calls.count(subject.email("once").subject) == 1


def test_a_publish_with_headers_is_validated_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The publisher leaves validation to the sender (before, it validated too, and the
    outbox and the mail senders once more as they encoded)."""
    import mailbus

    calls = count_validations(monkeypatch)
    inner = in_process_transport()
    sender = OutboxSender(inner.sender, tmp_path / "outbox")
    with mailbus.Context(transport=Transport(sender, inner.receiver, name="outbox")) as ctx:
        subscription = ctx.subscription("contract/headers")
        ctx.publisher("contract/headers").publish("{}", headers={"Unit": "celsius"})
        assert mailbus.wait_for_message(subscription, WAIT_S) is not None
        with pytest.raises(InvalidNameError, match="Unit"):
            ctx.publisher("contract/headers").publish("{}", headers={"Unit": "c\r\nBcc: x@y"})
    assert calls.count("contract/headers") == 2  # the good one once, the bad one once


def test_sending_after_close_is_a_clear_error(subject: Subject) -> None:
    subject.transport.close()
    with pytest.raises(TransportError):
        subject.transport.sender.send(subject.email("too late"))


def test_bytes_that_are_not_an_email_are_handed_up_raw_and_the_stream_goes_on(
    subject: Subject,
) -> None:
    """Garbage never raises from receive() nor arrives as a parsed Email: it comes up as
    RawEmail (the engine counts it as malformed), and the next email still arrives."""
    garbage = b"\xff\xfe\x00 not an email \x80\r\n\r\n\xc3("
    subject.inject(garbage)
    subject.transport.sender.send(subject.email("after the garbage"))
    items: list[Inbound] = []

    def good_one_arrived() -> bool:
        items.extend(subject.transport.receiver.receive(0.2))
        return any(isinstance(i, Email) or _is_mail(i) for i in items)

    eventually(good_one_arrived, WAIT_S, "the email after the garbage")
    parsed = [i if isinstance(i, Email) else from_bytes(i.data) for i in items if _is_mail(i)]
    assert [e.body.rstrip("\n") for e in parsed] == ["after the garbage"]
    others = [i for i in items if not _is_mail(i)]
    assert all(isinstance(i, RawEmail) and b"not an email" in i.data for i in others), others


def _is_mail(item: Inbound) -> bool:
    if isinstance(item, Email):
        return True
    try:
        from_bytes(item.data)
    except Exception:  # any refusal: the bytes are not an email
        return False
    return True


def test_a_message_over_the_size_limit_is_refused_by_name_and_the_stream_goes_on(
    subject: Subject,
) -> None:
    """Just over the declared limit: not delivered, reported by a trace event that names
    it, and nothing else lost; just under: delivered whole."""
    receiver = subject.transport.receiver
    limit = subject.limit
    if limit is None:  # declared unbounded: a large message passes whole
        big = subject.sized_email(UNBOUNDED_PROBE)
        subject.transport.sender.send(big)
        assert subject.receive_bodies(1) == [big.body]
        return
    events: list[TraceEvent] = []
    subject.tracer.add_listener(events.append)
    # What the path adds on the way (a mail server's Received and Return-Path headers),
    # measured, so that "just under" is just under what the receiver counts.
    probe = subject.email("probe", message_id=new_message_id())
    subject.transport.sender.send(probe)
    arrived: list[Inbound] = []

    def probe_arrived() -> bool:
        arrived.extend(receiver.receive(0.2))
        return bool(arrived)

    eventually(probe_arrived, WAIT_S, "the probe")
    [raw] = arrived
    added = len(raw.data) - len(to_bytes(probe)) if isinstance(raw, RawEmail) else 0
    slack = 64 if added else 0  # the added headers' dates and queue ids vary in length

    over = subject.sized_email(limit.max_bytes + 1)  # over already before anything is added
    under = subject.sized_email(limit.max_bytes - added - slack)
    for email in (over, under, subject.email("after")):
        subject.transport.sender.send(email)
    got = [b.rstrip("\n") for b in subject.receive_bodies(2)]
    expected = [under.body, "after"]
    assert got == expected if subject.in_order else sorted(got) == sorted(expected)

    def reported() -> bool:
        return any(e.kind == limit.kind and limit.names(e, over) for e in list(events))

    eventually(reported, WAIT_S, f"a {limit.kind} event naming the oversized message")
    [event] = [e for e in events if e.kind == limit.kind]
    assert event.detail, "the report says why"
    assert str(limit.max_bytes) in event.detail or not limit.says_limit, event.detail
    # Nothing else came: the oversized one is not delivered late, nor is anything twice.
    assert receiver.receive(0.5) == []
