"""The stack without Postfix (what runs where the tests are not root): the SMTP ports
are served by the LMTP relay, and the transport works through it the same way."""

from __future__ import annotations

import smtplib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mailbus
import pytest
import trustme
from conftest import make_options
from mailbus.mail.errors import MailLoginError
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.mail.tls import TlsSettings
from mailbus.stacks.lmtp_relay import LmtpRelay
from mailbus.stacks.loopback import HOST, free_port
from mailbus.stacks.mailstack import REJECTED, MailStack
from test_integration import Events, take
from test_sender import check_one_refused_recipient_does_not_block_the_others, email_to

pytestmark = pytest.mark.mailstack


@pytest.fixture(scope="module")
def relay_stack() -> Iterator[MailStack]:
    with MailStack(postfix=False) as stack:
        assert stack.smtp_server == "lmtp-relay"
        yield stack


def test_pubsub_through_the_relay_over_smtps_and_starttls(relay_stack: MailStack) -> None:
    for url in (relay_stack.smtps_url, relay_stack.smtp_url):
        user = relay_stack.add_user()
        with mailbus.Context(make_options(relay_stack, user, url_smtp=url)) as ctx:
            sub = ctx.subscription("t")
            ctx.publisher("t").publish(f"via {url}")
            assert take(sub, 1) == [f"via {url}"]


def test_relay_refuses_wrong_passwords_and_the_rejected_address(relay_stack: MailStack) -> None:
    user = relay_stack.add_user()
    settings = SmtpSettings(
        relay_stack.smtps_url, user.address, "nope", TlsSettings(ca_file=relay_stack.ca_file)
    )
    sender = SmtpSender(settings)
    with pytest.raises(MailLoginError, match="SMTP login"):
        sender.check_login()
    sender.close(timeout=0)
    ctx = mailbus.Context(make_options(relay_stack, user))
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        sender: Any = ctx.transport.sender
        sender.send(email_to(REJECTED, sender=user.address))
        assert events.wait_for("mail.send_rejected")
        assert sender.flush(10)


def test_relay_stopped_sends_fail_and_are_retried(relay_stack: MailStack) -> None:
    user = relay_stack.add_user()
    ctx = mailbus.Context(make_options(relay_stack, user))
    events = Events()
    ctx.tracer.add_listener(events)
    try:
        with ctx:
            sub = ctx.subscription("t")
            relay_stack.stop_smtp()
            ctx.publisher("t").publish("later")
            assert events.wait_for("mail.send_failed")
            relay_stack.start_smtp()
            assert take(sub, 1, timeout=20) == ["later"]
    finally:
        relay_stack.start_smtp()


def test_relay_refuses_oversized_email_like_postfix(relay_stack: MailStack) -> None:
    user = relay_stack.add_user()
    ctx = mailbus.Context(make_options(relay_stack, user))
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx:
        sender: Any = ctx.transport.sender
        sender.send(email_to(user.address, sender=user.address, body="y" * 900))
        sender.send(
            email_to(user.address, sender=user.address, body="\n".join(["x" * 900] * 12_000))
        )
        assert sender.flush(20)
        [rejected] = events.wait_for("mail.send_rejected")
        assert rejected.extra["smtp_code"] == 552
        assert sender.counters["sent"] == 1


def test_relay_one_refused_recipient_does_not_block_the_others(relay_stack: MailStack) -> None:
    check_one_refused_recipient_does_not_block_the_others(relay_stack, relay_stack.add_user())


def test_routed_mode_through_the_relay(relay_stack: MailStack) -> None:
    # The relay delivers over LMTP too, so Sieve files the mail into its folder.
    user = relay_stack.add_user()
    routed = {"routing": "sieve", "routed-topics": ["t"], "url-sieve": relay_stack.sieve_url}
    with mailbus.Context(make_options(relay_stack, user, mail=routed)) as ctx:
        sub = ctx.subscription("t")
        receiver: Any = ctx.transport.receiver
        ctx.publisher("t").publish("filed")
        assert take(sub, 1) == ["filed"]
        assert receiver.folders == ["mailbus-t-t"]


def test_ports_are_chosen_outside_the_range_clients_are_given() -> None:
    # An ephemeral port can become an outgoing connection's local port before the
    # server binds it; CI lost a relay that way.
    low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = {free_port() for _ in range(50)}
    assert all(not low <= port <= high for port in ports)
    assert len(ports) > 40  # chosen at random: parallel workers rarely meet


def test_a_relay_whose_port_was_taken_starts_on_others_and_fails_nothing() -> None:
    with socket.socket() as squatter:
        squatter.bind((HOST, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        stack = MailStack(postfix=False)
        stack.smtp_port = taken
        with stack:
            assert stack.smtp_port != taken
            with smtplib.SMTP(HOST, stack.smtp_port, timeout=10) as client:
                assert client.ehlo()[0] == 250


def test_a_relay_that_cannot_bind_says_so_and_stops_at_once(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert(HOST)
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "k.pem"))
    with socket.socket() as squatter:
        squatter.bind((HOST, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        relay = LmtpRelay(
            HOST,
            free_port(),
            taken,  # the second server fails: the first must not stay open
            tmp_path / "c.pem",
            tmp_path / "k.pem",
            tmp_path / "lmtp",
            lambda _user, _password: False,
            REJECTED,
        )
        with pytest.raises(OSError, match="address already in use"):
            relay.start()
        relay.stop()  # returned at once: no loop left to wait on
        with socket.socket() as again:
            again.bind((HOST, relay.ports[0]))  # the first server was closed
