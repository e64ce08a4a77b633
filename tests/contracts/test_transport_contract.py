"""One contract for every transport (issue 14 item 6, after harlequin's adapter tests):
the same tests run over the in-process transport, the outbox-wrapped sender, the
PostOffice daemon and real email (Dovecot + Postfix on loopback, marker mailstack).
What a transport does beyond the contract stays in its own area's tests."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus.email_message import Email, from_bytes
from mailbus.errors import TransportError
from mailbus.inprocess import in_process_transport
from mailbus.options import options_from_mapping
from mailbus.outbox import OutboxSender
from mailbus.trace import Tracer
from mailbus.transport import Inbound, RawEmail, Transport
from waiting import eventually

WAIT_S = 30.0  # bound of every wait; a healthy transport answers far sooner


class Subject:
    """A transport under contract and the address its own receiver reads."""

    def __init__(
        self,
        transport: Transport,
        address: str,
        inject: Callable[[bytes], None],
        *,
        in_order: bool = True,
    ) -> None:
        self.transport = transport
        self.address = address
        self.inject = inject  # puts raw bytes where the receiver reads, past the sender
        self.in_order = in_order  # whether the transport keeps the sending order

    def email(self, body: str, **kwargs: Any) -> Email:
        return Email("contract/letter", body, to=(self.address,), **kwargs)

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
    )
    server = ServerThread(config).start()
    try:
        table = {"port": server.port, "box": "contract.me", "password": "pw"}
        options = options_from_mapping({"transport": "postoffice", "postoffice": table})
        transport = create_transport(options, Tracer())

        def inject(data: bytes) -> None:
            client = PostOfficeClient("127.0.0.1", server.port, timeout=10.0)
            try:
                with contextlib.suppress(Exception):  # made by an earlier injection
                    client.create_box("junk", "pw")
                client.check_out("junk", "pw")
                client.send("contract.me", data)
            finally:
                client.close()

        yield Subject(transport, "contract.me@postoffice", inject)
    finally:
        server.stop()


def _email(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
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
        "mail": {"reconnect-max-s": 0.5},
    }
    transport = create_transport(options_from_mapping(raw, {}), Tracer())
    transport.receiver.connect()  # type: ignore[attr-defined]
    # A mail server may deliver a burst in any order (docs/mail.md, "Delivery order").
    inject = functools.partial(stack.deliver, user.address)
    yield Subject(transport, user.address, inject, in_order=False)


def _email_relay(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Subject]:
    """Email received through the host relay (`share = "relay"`), the relay on a thread."""
    from mailbus.mail.transport import create_transport, mail_section
    from mailbus.relay.server import MailRelay

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
        "mail": {"reconnect-max-s": 0.5, "share": "relay", "relay-socket": str(socket)},
    }
    options = options_from_mapping(raw, {})
    relay = MailRelay(options, mail_section(options), socket, tmp_path / "state")
    ready = threading.Event()
    thread = threading.Thread(target=relay.run, args=(ready.set,), daemon=True)
    thread.start()
    try:
        assert ready.wait(WAIT_S), "the relay did not start"
        transport = create_transport(options, Tracer())
        inject = functools.partial(stack.deliver, user.address)
        yield Subject(transport, user.address, inject, in_order=False)
    finally:
        relay.stop()
        thread.join(WAIT_S)


MAKERS: dict[str, Callable[[Path, pytest.FixtureRequest], Iterator[Subject]]] = {
    "inprocess": _inprocess,
    "outbox": _outbox,
    "postoffice": _postoffice,
    "email": _email,
    "email-relay": _email_relay,
}


@pytest.fixture(
    params=[
        "inprocess",
        "outbox",
        "postoffice",
        pytest.param("email", marks=pytest.mark.mailstack),
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


def test_header_injection_is_refused_before_anything_is_sent(
    subject: Subject, request: pytest.FixtureRequest
) -> None:
    if subject.transport.name == "inprocess":
        # Found by this suite: the in-process sender hands Email objects over without
        # validate(); only the engine above it refuses. Strict: passes once it is fixed.
        request.applymarker(pytest.mark.xfail(strict=True, reason="in-process skips validate"))
    evil = subject.email("evil", headers={"X-Note": "a\r\nBcc: victim@example.org"})
    with pytest.raises((ValueError, TransportError)):
        subject.transport.sender.send(evil)
    subject.transport.sender.send(subject.email("after"))
    assert [b.rstrip("\n") for b in subject.receive_bodies(1)] == ["after"]


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
