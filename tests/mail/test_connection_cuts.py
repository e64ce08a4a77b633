"""A connection dropped in the middle of a FETCH or of an IDLE, on every server of the
suite: the receiver says so, reconnects, and every message arrives exactly once.

The receiver reads through tests/mail/cutting_proxy.py, which cuts the TCP connection
at the chosen point of the IMAP exchange (the server itself runs on)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory
from cutting_proxy import CuttingProxy
from mailbus.email_message import from_bytes
from mailbus.mail.relay.receiver import RelayReceiver
from mailbus.mail.relay.server import MailRelay
from mailbus.mail.sieve_script import folder_name
from mailbus.mail.transport import mail_section
from mailbus.stacks.mailstack import MailStack, User
from mailbus.stacks.waiting import eventually
from mailbus.trace import Tracer
from test_faults import FetchLog, _mailbus_email
from test_integration import Events, take
from test_server_side_faults import client_of
from test_sieve_routing import mailbox_counts

pytestmark = pytest.mark.mailstack


@pytest.fixture
def proxy(mail_stack: MailStack) -> Iterator[CuttingProxy]:
    cutter = CuttingProxy(mail_stack)
    yield cutter
    cutter.close()


def messages_in(client: imapclient.IMAPClient) -> int:
    return int(client.folder_status("INBOX", [b"MESSAGES"])[b"MESSAGES"])


def deliver_all(stack: MailStack, user: User, bodies: list[str], watcher: Any) -> None:
    """Deliver `bodies` over LMTP and wait, bounded, until the mailbox holds them."""
    before = messages_in(watcher)
    for body in bodies:
        stack.deliver(user.address, _mailbus_email(user, body))
    eventually(lambda: messages_in(watcher) >= before + len(bodies), timeout=15)


def read_to_the_end(ctx: mailbus.Context, sub: Any, count: int, user: User) -> list[str]:
    """The next `count` bodies, then a last message: nothing may come between them and
    it (a copy fetched twice would, and the engine's Message-ID check is not asked)."""
    got = take(sub, count)
    ctx.publisher("work").publish("the end")
    return got + take(sub, 1)


def uids_fetched_once(fetch_log: FetchLog) -> None:
    twice = sorted({o for o in fetch_log.origins if fetch_log.origins.count(o) > 1})
    assert twice == [], f"fetched more than once: {twice} of {fetch_log.origins}"


def test_a_connection_cut_inside_a_fetch_literal_loses_nothing_and_fetches_nothing_twice(
    mail_stack: MailStack, user: User, options_for: OptionsFactory, proxy: CuttingProxy
) -> None:
    watcher = client_of(mail_stack, user)
    ctx = mailbus.Context(
        options_for(user, url_imap=proxy.url, mail={"share": "none", "reconnect-max-s": 0.3})
    )
    events = Events()
    ctx.tracer.add_listener(events)
    try:
        with ctx:
            receiver: Any = ctx.transport.receiver
            fetch_log = FetchLog(receiver)
            sub = ctx.subscription("work", depth=50)
            ctx.publisher("work").publish("before")
            assert take(sub, 1) == ["before"]
            # Keep the receiver off the server while five messages land, so that one
            # FETCH carries all five bodies; the proxy cuts inside the third.
            proxy.refuse()
            proxy.cut_in_fetch_literal(literal_index=3)
            proxy.drop_all()
            events.wait_for("mail.reconnect_failed")
            bodies = [f"m{i}" for i in range(5)]
            deliver_all(mail_stack, user, bodies, watcher)
            proxy.refuse(False)
            assert proxy.cut_made.wait(20), "the FETCH was never cut"
            [cut] = proxy.cuts
            # The client had two whole bodies and part of the third when the line went.
            assert 0 < cut.literal_sent < cut.literal_size
            got = read_to_the_end(ctx, sub, 5, user)
            assert got == [*bodies, "the end"], events.items[-20:]
            uids_fetched_once(fetch_log)
            assert receiver.counters["fetched"] == 7  # before, m0-m4, the end
            # The cut was said out loud, once per lost connection.
            lost = events.of("mail.disconnected")
            assert len(lost) == receiver.counters["disconnects"] == 2, lost
            assert all(e.detail.startswith(proxy.url) for e in lost), lost
            assert receiver.counters["connections_opened"] == proxy.connections == 3
        assert ctx.counters.get("duplicates", 0) == 0
        assert ctx.counters["received"] == 7
    finally:
        watcher.logout()


def test_a_connection_cut_in_idle_as_mail_is_announced_loses_nothing(
    mail_stack: MailStack, user: User, options_for: OptionsFactory, proxy: CuttingProxy
) -> None:
    watcher = client_of(mail_stack, user)
    options = options_for(
        user,
        url_imap=proxy.url,
        mail={"share": "none", "reconnect-max-s": 0.3, "quiet-ms": 200, "idle": "auto"},
    )
    ctx = mailbus.Context(options)
    events = Events()
    ctx.tracer.add_listener(events)
    try:
        with ctx:
            receiver: Any = ctx.transport.receiver
            fetch_log = FetchLog(receiver)
            sub = ctx.subscription("work", depth=50)
            ctx.publisher("work").publish("before")
            assert take(sub, 1) == ["before"]
            # The next IDLE is cut when the server announces new mail: the client never
            # sees the EXISTS, and the proxy then keeps it away while more mail lands.
            proxy.cut_in_idle(refuse_after=True)
            assert proxy.in_idle.wait(20), "the receiver never went to IDLE"
            deliver_all(mail_stack, user, ["announced"], watcher)
            assert proxy.cut_made.wait(20), "the IDLE was never cut"
            [cut] = proxy.cuts
            assert b"EXISTS" in cut.dropped or b"RECENT" in cut.dropped
            [lost] = events.wait_for("mail.disconnected")
            assert lost.detail.startswith(proxy.url), lost
            events.wait_for("mail.reconnect_failed")
            later = [f"later {i}" for i in range(3)]
            deliver_all(mail_stack, user, later, watcher)
            proxy.refuse(False)
            got = read_to_the_end(ctx, sub, 4, user)
            assert got == ["announced", *later, "the end"], events.items[-20:]
            uids_fetched_once(fetch_log)
            assert receiver.counters["fetched"] == 6
            assert receiver.counters["disconnects"] == 1
            assert receiver.counters["reconnect_failed"] >= 1
        assert ctx.counters.get("duplicates", 0) == 0
        assert ctx.counters["received"] == 6
    finally:
        watcher.logout()


def test_a_routed_receiver_cut_in_its_second_folder_keeps_what_the_first_gave(
    mail_stack: MailStack, user: User, options_for: OptionsFactory, proxy: CuttingProxy
) -> None:
    # One poll reads folder after folder: a cut inside the second folder's FETCH must
    # not lose the mail already read from the first (its cursor had moved past it).
    topics = ["robot/camera", "robot/pose"]
    folders = [folder_name("mailbus", "t", topic) for topic in topics]
    routed = {"routing": "sieve", "routed-topics": topics, "url-sieve": mail_stack.sieve_url}
    ctx = mailbus.Context(
        options_for(user, url_imap=proxy.url, mail={**routed, "reconnect-max-s": 0.3})
    )
    events = Events()
    ctx.tracer.add_listener(events)
    with ctx, mailbus.Context(options_for(user)) as publisher:
        receiver: Any = ctx.transport.receiver
        fetch_log = FetchLog(receiver)
        subs = [ctx.subscription(topic, depth=10) for topic in topics]
        assert receiver.folders == sorted(folders)
        proxy.refuse()
        proxy.cut_in_fetch_literal(literal_index=2)
        proxy.drop_all()
        events.wait_for("mail.reconnect_failed")
        for topic in topics:
            publisher.publisher(topic).publish(f"to {topic}")
        eventually(
            lambda: all(mailbox_counts(mail_stack, user).get(f) == 1 for f in folders),
            timeout=20,
            what="Sieve filed one message into each folder",
        )
        proxy.refuse(False)
        assert proxy.cut_made.wait(20), "the FETCH was never cut"
        [cut] = proxy.cuts
        assert 0 < cut.literal_sent < cut.literal_size
        for topic, sub in zip(topics, subs, strict=True):
            assert take(sub, 1) == [f"to {topic}"], events.items[-20:]
        # Nothing more in either folder: a last message to each comes next.
        for topic in topics:
            publisher.publisher(topic).publish("the end")
        for sub in subs:
            assert take(sub, 1) == ["the end"]
        uids_fetched_once(fetch_log)
        assert receiver.counters["disconnects"] == 2
        assert len(events.of("mail.disconnected")) == 2
    assert ctx.counters.get("duplicates", 0) == 0
    assert ctx.counters["received"] == 4


def test_the_relay_reader_cut_in_idle_reconnects_and_its_participant_loses_nothing(
    mail_stack: MailStack,
    user: User,
    options_for: OptionsFactory,
    proxy: CuttingProxy,
    tmp_path: Path,
) -> None:
    # The relay's reader waits in IDLE in a select() of its own (mailbus.mail.relay.
    # reader): the end of the stream must be seen there too.
    watcher = client_of(mail_stack, user)
    socket = tmp_path / "relay.sock"
    options = options_for(
        user,
        url_imap=proxy.url,
        mail={"share": "relay", "relay-socket": str(socket), "quiet-ms": 100},
    )
    events = Events()
    tracer = Tracer()
    tracer.add_listener(events)
    relay = MailRelay(options, mail_section(options), socket, tmp_path / "state", tracer)
    ready = threading.Event()
    thread = threading.Thread(target=relay.run, args=(ready.set,), daemon=True)
    thread.start()
    try:
        assert ready.wait(30)
        participant = RelayReceiver(socket, max_message_bytes=1 << 20)
        participant.connect()
        proxy.cut_in_idle(refuse_after=True)
        assert proxy.in_idle.wait(20), "the relay never went to IDLE"
        deliver_all(mail_stack, user, ["announced"], watcher)
        assert proxy.cut_made.wait(20), "the IDLE was never cut"
        [lost] = events.wait_for("mail.disconnected")
        assert lost.detail.startswith(proxy.url), lost
        events.wait_for("mail.reconnect_failed")
        deliver_all(mail_stack, user, ["later 0", "later 1"], watcher)
        proxy.refuse(False)
        deliver_all(mail_stack, user, ["the end"], watcher)
        got: list[str] = []
        eventually(
            lambda: (
                got.extend(from_bytes(i.data).body for i in participant.receive(0.2))
                or "the end" in got
            ),
            30,
            "the last message",
        )
        assert got == ["announced", "later 0", "later 1", "the end"], events.items[-20:]
        assert relay.receiver.counters["disconnects"] == 1
        assert relay.receiver.counters["fetched"] == 4
        participant.close()
    finally:
        relay.stop()
        thread.join(30)
        watcher.logout()
    assert not thread.is_alive()
