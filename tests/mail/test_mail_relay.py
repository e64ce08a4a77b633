"""The host relay on the real stack with real processes: more
participant processes than the account's connection limit all receive every message
exactly once through one relay; a relay SIGKILLed and restarted loses and duplicates
nothing; no relay at start is an error that says how to start one."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import mailbus
import pytest
from conftest import OptionsFactory, make_options
from mailbus.errors import ConfigError
from mailbus.mail.kinds import MailKind
from mailbus.mail.relay import server
from mailbus.mail.relay.receiver import RelayReceiver, RelayUnavailableError
from mailbus.mail.relay.server import MailRelay
from mailbus.mail.relay.state import load_state
from mailbus.mail.transport import mail_section
from mailbus.stacks.mailstack import MAX_USERIP_CONNECTIONS, MailStack, User
from mailbus.trace import Tracer
from test_multiprocess import Proc, write_config
from waiting import eventually

pytestmark = pytest.mark.mailstack


class Relay:
    """`mailbus mail-relay` in its own process."""

    def __init__(self, config: Path, state_dir: Path, socket: Path, password: str) -> None:
        env = {**os.environ, "MAILBUS_PASSWORD": password}
        env.pop("MAILBUS_CONFIG_FILE", None)
        command = [sys.executable, "-m", "mailbus", "--config", str(config), "mail-relay"]
        self.proc = subprocess.Popen(
            [*command, "--state-dir", str(state_dir), "--socket", str(socket)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # bounded: the relay fails or says it listens
        if not line.startswith("mail-relay listening on"):
            self.proc.kill()
            raise AssertionError(f"relay did not start: {line!r} {self.proc.stderr.read()}")  # type: ignore[union-attr]

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        counters: dict[str, Any] = json.loads(out.strip().splitlines()[-1])["counters"]
        return counters

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)


@pytest.fixture
def procs() -> Iterator[list[Proc | Relay]]:
    started: list[Proc | Relay] = []
    yield started
    for proc in started:  # also when the test failed
        proc.kill()


def relay_config(path: Path, stack: MailStack, user: User, socket: Path) -> Path:
    return write_config(path, stack, user, 'share = "relay"', f'relay-socket = "{socket}"')


def test_more_participants_than_the_connection_limit_share_one_relay(
    smtp_stack: MailStack, user: User, tmp_path: Path, procs: list[Proc | Relay]
) -> None:
    socket = tmp_path / "relay.sock"
    config = relay_config(tmp_path / "mailbus.toml", smtp_stack, user, socket)
    relay = Relay(config, tmp_path / "state", socket, user.password)
    procs.append(relay)
    count = 10
    subscribers = [
        Proc("subscribe", config, "news", count, user.password)
        for _ in range(MAX_USERIP_CONNECTIONS + 1)
    ]
    procs.extend(subscribers)
    for subscriber in subscribers:
        subscriber.ready()
    publisher = Proc("publish", config, "news", count, user.password)
    procs.append(publisher)
    assert publisher.result()["flushed"] is True
    expected = [f"message {i}" for i in range(count)]
    for subscriber in subscribers:
        received = subscriber.result()
        assert sorted(received["bodies"]) == sorted(expected)
        assert received["counters"].get("duplicates", 0) == 0
    counters = relay.stop()
    # One reading of the inbox for all twelve participants: each body fetched once.
    assert counters["fetched"] == count
    assert counters["relay_joined"] == len(subscribers) + 1
    assert counters["relay_nudges"] >= 1  # the publisher said it sent


def test_a_relay_killed_and_restarted_loses_and_duplicates_nothing(
    smtp_stack: MailStack,
    user: User,
    tmp_path: Path,
    procs: list[Proc | Relay],
    options_for: OptionsFactory,
) -> None:
    socket, state_dir = tmp_path / "relay.sock", tmp_path / "state"
    config = relay_config(tmp_path / "mailbus.toml", smtp_stack, user, socket)
    relay = Relay(config, state_dir, socket, user.password)
    procs.append(relay)
    count = 20
    subscribers = [Proc("subscribe", config, "news", count, user.password) for _ in range(3)]
    procs.extend(subscribers)
    for subscriber in subscribers:
        subscriber.ready()
    (state_file,) = state_dir.iterdir()
    start = load_state(state_file)
    assert start is not None
    with mailbus.Context(options_for(user)) as ctx:  # a publisher with its own receiver
        pub = ctx.publisher("news")
        for i in range(count // 2):
            pub.publish(f"message {i}")
        # Killed once it has read part of the traffic, mid-stream for some participants.
        eventually(
            lambda: (
                (state := load_state(state_file)) is not None and state.next_uid > start.next_uid
            ),
            30,
        )
        relay.proc.send_signal(signal.SIGKILL)
        relay.proc.communicate(timeout=10)
        for i in range(count // 2, count):  # sent while no relay runs
            pub.publish(f"message {i}")
        assert ctx.transport.sender.flush(30)  # type: ignore[attr-defined]
        restarted = Relay(config, state_dir, socket, user.password)
        procs.append(restarted)
    expected = sorted(f"message {i}" for i in range(count))
    for subscriber in subscribers:
        received = subscriber.result()
        assert sorted(received["bodies"]) == expected
        assert received["counters"].get("duplicates", 0) == 0
    # It went on from its state file: it read what came while it was down itself (from
    # UIDNEXT it would not have, and the participants would have caught up instead).
    assert restarted.stop()["fetched"] >= count // 2


def test_no_relay_running_is_an_error_with_the_fix(
    user: User, tmp_path: Path, options_for: OptionsFactory
) -> None:
    socket = tmp_path / "relay.sock"
    options = options_for(user, mail={"share": "relay", "relay-socket": str(socket)})
    with pytest.raises(RelayUnavailableError) as info:
        mailbus.Context(options).init()
    assert str(socket) in str(info.value)
    assert "mail-relay" in str(info.value)


def test_a_relay_in_idle_sees_mail_from_elsewhere_and_a_nudge_ends_its_idle(
    mail_stack: MailStack, user: User, tmp_path: Path, options_for: OptionsFactory
) -> None:
    socket = tmp_path / "relay.sock"
    options = options_for(
        user, mail={"share": "relay", "relay-socket": str(socket), "quiet-ms": 100}
    )
    tracer = Tracer()
    idle = threading.Event()
    tracer.add_listener(lambda event: event.kind == MailKind.IDLE and idle.set())
    relay = MailRelay(options, mail_section(options), socket, tmp_path / "state", tracer)
    ready = threading.Event()
    thread = threading.Thread(target=relay.run, args=(ready.set,), daemon=True)
    thread.start()
    try:
        assert ready.wait(30)
        assert stat.S_IMODE(socket.stat().st_mode) == 0o600  # it carries all the mail
        second = MailRelay(options, mail_section(options), socket, tmp_path / "state")
        with pytest.raises(ConfigError, match="a relay already runs"):
            second.run()
        participant = RelayReceiver(socket, max_message_bytes=1 << 20)
        participant.connect()
        assert idle.wait(10), "the relay did not go to IDLE"
        idle.clear()
        # The IDLE event comes as the relay turns to IDLE; mail delivered before the IDLE
        # command itself is read by the poll before it or reported at its start, not
        # announced in it: deliver once the command is in (as test_sender does).
        eventually(lambda: relay.receiver.counters["idles"] >= 1, 10, "the IDLE command")
        # Delivered straight into Dovecot: only the server's announcement tells the relay.
        mail_stack.deliver(user.address, b"Subject: from elsewhere\r\n\r\nhello\r\n")
        got: list[Any] = []
        eventually(lambda: got.extend(participant.receive(0.2)) or got, 20)
        assert len(got) == 1 and b"from elsewhere" in got[0].data
        assert relay.receiver.counters["idle_wakeups"] >= 1
        assert idle.wait(10), "the relay did not go back to IDLE"
        participant.nudge()
        eventually(lambda: relay.receiver.counters["nudged"] == 1, 10)
        participant.close()
    finally:
        relay.stop()
        thread.join(30)
    assert not thread.is_alive() and not socket.exists()


def test_a_catch_up_reads_the_server_in_bounded_pieces(
    mail_stack: MailStack, user: User, options_for: OptionsFactory, monkeypatch: Any
) -> None:
    options = options_for(user)
    reader = server.imap_receiver(options, mail_section(options), Tracer())
    reader.connect()
    try:
        first = reader.cursor.next_uid
        uidvalidity = reader.cursor.uidvalidity
    finally:
        reader.close()
    assert first is not None and uidvalidity is not None
    for i in range(5):
        mail_stack.deliver(user.address, f"Subject: {i}\r\n\r\n{'x' * 1000}\r\n".encode())
    counters: Counter[str] = Counter()
    fetch = partial(server.fetch_range, reader.settings, Tracer(), counters, 1 << 20, uidvalidity)
    everything, through = fetch(first, first + 10)
    assert [uid for uid, _ in everything] == list(range(first, first + 5))
    assert through == first + 10
    # A budget of two of these mails (their size on the server is their bytes here; on
    # Cyrus their headers differ by a few bytes, so two of the largest).
    monkeypatch.setattr(server, "CATCH_UP_BYTES", 2 * max(len(b) for _, b in everything))
    mails, through = fetch(first, first + 10)
    assert [uid for uid, _ in mails] == [first, first + 1] and through == first + 1
    assert b"Subject: 1" in mails[1][1]
    mails, through = fetch(through + 1, first + 10)
    assert [uid for uid, _ in mails] == [first + 2, first + 3] and through == first + 3
    # A mailbox recreated since (another UIDVALIDITY): nothing, and no error.
    assert fetch.func(*fetch.args[:-1], uidvalidity + 1, first, first + 10) == ([], first + 10)


def test_a_relay_whose_server_goes_away_in_idle_reconnects_and_goes_on(tmp_path: Path) -> None:
    events: list[str] = []
    seen = threading.Event()

    def listen(event: Any) -> None:
        events.append(event.kind)
        seen.set()

    with MailStack() as stack:  # its own: this test stops Dovecot
        user = stack.add_user()
        socket = tmp_path / "relay.sock"
        options = make_options(
            stack,
            user,
            mail={"share": "relay", "relay-socket": str(socket), "quiet-ms": 100},
        )
        tracer = Tracer()
        tracer.add_listener(listen)
        relay = MailRelay(options, mail_section(options), socket, tmp_path / "state", tracer)
        ready = threading.Event()
        thread = threading.Thread(target=relay.run, args=(ready.set,), daemon=True)
        thread.start()
        try:
            assert ready.wait(30)
            participant = RelayReceiver(socket, max_message_bytes=1 << 20)
            participant.connect()
            eventually(lambda: MailKind.IDLE in events, 10, "the relay in IDLE", wake=seen)
            stack.stop_imap()
            eventually(lambda: MailKind.DISCONNECTED in events, 10, "the drop seen", wake=seen)
            stack.start_imap()
            stack.deliver(user.address, b"Subject: after the restart\r\n\r\nhello\r\n")
            got: list[Any] = []
            eventually(lambda: got.extend(participant.receive(0.2)) or got, 30)
            assert [b"after the restart" in item.data for item in got] == [True]
            assert relay.receiver.counters["connections_opened"] >= 2
            participant.close()
        finally:
            relay.stop()
            thread.join(30)
