"""The host relay without a mail server: its wire codec byte by byte, and its fan-out hub
on a real Unix socket with real participant receivers (the IMAP side replaced by a
dictionary of mails). Garbage, a participant gone mid-stream and a slow participant."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus.backoff import Backoff
from mailbus.errors import ConfigError
from mailbus.mail.relay.codec import (
    PARTICIPANT_SENDS,
    RELAY_SENDS,
    Bye,
    Decoder,
    Hello,
    Mail,
    Nudge,
    RelayProtocolError,
    Welcome,
    encode,
)
from mailbus.mail.relay.config import MAX_SOCKET_PATH_BYTES, socket_path
from mailbus.mail.relay.hub import Hub
from mailbus.mail.relay.receiver import RelayReceiver, RelayUnavailableError
from mailbus.mail.relay.state import RelayState, load_state, save_state
from mailbus.mail.transport import mail_section
from mailbus.options import options_from_mapping
from mailbus.trace import Tracer
from mailbus.transport import Inbound, RawEmail
from waiting import eventually

UIDVALIDITY = 7


# -- the codec --------------------------------------------------------------------------
def test_frames_are_the_documented_bytes() -> None:
    assert encode(Hello(7, 41)) == (
        b"\x01\x00\x00\x00\x10" + b"MBRELAY\x01" + b"\x00\x00\x00\x07" + b"\x00\x00\x00\x29"
    )
    assert encode(Welcome(7, 42)) == b"\x02\x00\x00\x00\x08\x00\x00\x00\x07\x00\x00\x00\x2a"
    assert encode(Mail(7, 42, b"Subject: x\r\n")) == (
        b"\x03\x00\x00\x00\x14\x00\x00\x00\x07\x00\x00\x00\x2aSubject: x\r\n"
    )
    assert encode(Bye("stop")) == b"\x04\x00\x00\x00\x04stop"
    assert encode(Nudge()) == b"\x05\x00\x00\x00\x00"


def test_a_long_reason_is_cut_on_a_character_boundary() -> None:
    decoder = Decoder(RELAY_SENDS, 10)
    decoder.feed(encode(Bye("é" * 1000)))
    frame = decoder.next_frame()
    assert isinstance(frame, Bye) and frame.reason == "é" * 512


frames = st.one_of(
    st.builds(Welcome, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.builds(Mail, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=300)),
    st.builds(Bye, st.text(max_size=50)),
)


@given(st.lists(frames, max_size=8), st.integers(1, 64))
def test_frames_decode_in_any_chunking(sent: list[Any], chunk: int) -> None:
    data = b"".join(encode(f) for f in sent)
    decoder = Decoder(RELAY_SENDS, 300)
    got = []
    for i in range(0, len(data), chunk):
        decoder.feed(data[i : i + chunk])
        while (frame := decoder.next_frame()) is not None:
            got.append(frame)
    assert got == sent and decoder.buffered == 0


@pytest.mark.parametrize(
    ("accept", "data", "says"),
    [
        (PARTICIPANT_SENDS, b"GET / HTTP/1.1\r\n", "unexpected frame type 71"),
        (PARTICIPANT_SENDS, encode(Welcome(1, 1)), "unexpected frame type 2"),
        (PARTICIPANT_SENDS, b"\x01\xff\xff\xff\xff", "over the limit"),
        (PARTICIPANT_SENDS, b"\x01\x00\x00\x00\x10NOTMAIL\x01" + bytes(8), "magic"),
        (PARTICIPANT_SENDS, b"\x01\x00\x00\x00\x10MBRELAY\x02" + bytes(8), "version 2"),
        (PARTICIPANT_SENDS, b"\x01\x00\x00\x00\x03abc", "HELLO of 3 bytes"),
        (PARTICIPANT_SENDS, b"\x05\x00\x00\x00\x01", "NUDGE of 1 bytes is over the limit"),
        (RELAY_SENDS, b"\x03\x00\x00\x10\x09", "MAIL of 4105 bytes is over the limit"),
        (RELAY_SENDS, b"\x03\x00\x00\x00\x02ab", "no UIDs"),
        (RELAY_SENDS, b"\x04\x00\x00\x00\x01\xff", "not UTF-8"),
    ],
)
def test_garbage_is_refused_and_the_decoder_stays_broken(
    accept: frozenset[Any], data: bytes, says: str
) -> None:
    decoder = Decoder(accept, 4096)
    with pytest.raises(RelayProtocolError, match=says):
        decoder.feed(data)
        decoder.next_frame()
    with pytest.raises(RelayProtocolError, match="broken since"):
        decoder.feed(encode(Bye("x")))


# -- options and state --------------------------------------------------------------------
def _options(**mail: Any) -> Any:
    raw = {
        "transport": "email",
        "url-smtp": "smtps://mail.example.org",
        "url-imap": "imaps://mail.example.org",
        "username": "robot@example.org",
        "password": "x",
        "recipients": {"to": ["robot@example.org"]},
        "mail": mail,
    }
    return options_from_mapping(raw, {})


def test_relay_options_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"mail\.share"):
        mail_section(_options(share="everyone"))
    with pytest.raises(ConfigError, match=r"mail\.relay-socket.*absolute"):
        socket_path(_options(share="relay"), {"relay-socket": "relay.sock"})
    too_long = "/" + "x" * MAX_SOCKET_PATH_BYTES
    with pytest.raises(ConfigError, match="at most 107 bytes"):
        socket_path(_options(share="relay"), {"relay-socket": too_long})
    with pytest.raises(ConfigError, match='only with share = "relay"'):
        mail_section(_options(**{"relay-socket": "/run/x.sock"}))
    with pytest.raises(ConfigError, match="start-uid"):
        mail_section(_options(share="relay", **{"start-uid": 1}))
    # The relay and its participants agree on the default without being told.
    one = socket_path(_options(share="relay"), {})
    assert one == socket_path(_options(share="relay"), {}) and one.is_absolute()
    assert one != socket_path(_options(share="relay"), {"mailbox": "Other"})


def test_state_is_replaced_whole_and_a_corrupt_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "relay.json"
    assert load_state(path) is None
    save_state(path, RelayState(7, 42))
    save_state(path, RelayState(7, 43))
    assert load_state(path) == RelayState(7, 43)
    assert [p.name for p in tmp_path.iterdir()] == ["relay.json"]
    path.write_text("{half")
    with pytest.raises(ConfigError, match="delete it"):
        load_state(path)


def test_the_relay_refuses_a_socket_directory_others_may_write(tmp_path: Path) -> None:
    from mailbus.mail.relay.server import MailRelay

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # without the sticky bit: anyone could swap the socket
    options = _options(share="relay")
    relay = MailRelay(options, mail_section(options), shared / "r.sock", tmp_path / "state")
    with pytest.raises(ConfigError, match="writable by no one else"):
        relay.run()
    assert not (shared / "r.sock").exists()


# -- the hub on a real socket ----------------------------------------------------------------
class HubThread:
    """A Hub serving a Unix socket on its own loop; `mails` plays the IMAP server."""

    def __init__(self, path: Path, **settings: Any) -> None:
        self.path = path
        self.mails: dict[int, bytes] = {}
        self.fetches: list[tuple[int, int]] = []
        self.nudged = threading.Event()
        self.fetch_limit = settings.get("fetch_limit", 1000)
        self.loop = asyncio.new_event_loop()
        self.hub = Hub(
            self._fetch,
            Tracer(),
            uidvalidity=UIDVALIDITY,
            next_uid=1,
            queue_bytes=settings.get("queue_bytes", 1 << 20),
            ring_bytes=settings.get("ring_bytes", 1 << 20),
            on_nudge=self.nudged.set,
        )
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10)

    def _fetch(
        self, uidvalidity: int, first: int, last: int
    ) -> tuple[list[tuple[int, bytes]], int]:
        """Like the server's: at most `fetch_limit` mails at a time."""
        self.fetches.append((first, last))
        found = [(u, self.mails[u]) for u in sorted(self.mails) if first <= u <= last]
        if len(found) > self.fetch_limit:
            found = found[: self.fetch_limit]
            return found, found[-1][0]
        return found, last

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_unix_server(self.hub.serve, path=str(self.path))
        )
        self.loop.call_soon(ready.set)
        self.loop.run_forever()
        server.close()
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))  # let the cancelled tasks end
        self.loop.close()

    def publish(self, count: int, size: int = 100) -> None:
        first = max(self.mails, default=0) + 1
        batch = [(u, f"{u}:".encode() + b"x" * size) for u in range(first, first + count)]
        self.mails.update(batch)
        self.loop.call_soon_threadsafe(self.hub.publish, UIDVALIDITY, batch, first + count)

    def on_loop(self, fn: Any) -> Any:
        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.hub.close, "test over")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubThread]:
    running = HubThread(tmp_path / "relay.sock")
    yield running
    running.stop()


def receiver(path: Path) -> RelayReceiver:
    r = RelayReceiver(path, max_message_bytes=1 << 20, backoff=Backoff(0.05, 0.2))
    r.connect()
    return r


def take(r: RelayReceiver, count: int, timeout: float = 20.0) -> list[int]:
    """UIDs received until `count` of them came (bounded)."""
    got: list[Inbound] = []

    def enough() -> bool:
        got.extend(r.receive(0.2))
        return len(got) >= count

    eventually(enough, timeout, f"{count} mails")
    got.extend(r.receive(0.2))  # and nothing more
    return [int(item.origin.removeprefix("uid:")) for item in got if isinstance(item, RawEmail)]


def test_every_participant_gets_every_mail_once(hub: HubThread) -> None:
    participants = [receiver(hub.path) for _ in range(3)]
    eventually(lambda: hub.on_loop(lambda: sum(p.live for p in hub.hub.peers)) == 3)
    hub.publish(20)
    for r in participants:
        assert take(r, 20) == list(range(1, 21))
        r.close()


def test_no_relay_is_an_error_that_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(
        RelayUnavailableError, match="start it with `mailbus --config FILE mail-relay`"
    ):
        RelayReceiver(tmp_path / "none.sock", max_message_bytes=100).connect()


def test_a_socket_of_another_user_is_not_trusted(hub: HubThread, monkeypatch: Any) -> None:
    monkeypatch.setattr(
        "mailbus.mail.relay.receiver.os.getuid", lambda: os.stat(hub.path).st_uid + 1
    )
    with pytest.raises(RelayUnavailableError, match="not a relay to trust"):
        receiver(hub.path)


def test_garbage_on_the_socket_is_refused_and_harms_nobody(hub: HubThread) -> None:
    good = receiver(hub.path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bad:
        bad.settimeout(10)
        bad.connect(str(hub.path))
        bad.sendall(b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
        answer = b""
        while chunk := bad.recv(4096):
            answer += chunk
    decoder = Decoder(RELAY_SENDS, 0)
    decoder.feed(answer)
    frame = decoder.next_frame()
    assert isinstance(frame, Bye) and "protocol error" in frame.reason
    assert hub.hub.counters["refused"] == 1
    hub.publish(5)
    assert take(good, 5) == [1, 2, 3, 4, 5]
    good.close()


def test_a_nudge_reaches_the_reader_and_a_second_hello_is_garbage(hub: HubThread) -> None:
    r = receiver(hub.path)
    eventually(lambda: hub.on_loop(lambda: len(hub.hub.peers)) == 1)
    r.nudge()
    r.nudge()  # within NUDGE_EVERY_S of the first: not sent
    assert hub.nudged.wait(10)
    assert r.counters["nudges"] == 1
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bad:
        bad.connect(str(hub.path))
        bad.sendall(encode(Hello(0, 0)) + encode(Hello(0, 0)))
        eventually(lambda: hub.hub.counters["dropped_garbage"] == 1)
    assert hub.hub.counters["nudges"] == 1
    r.close()


def test_a_participant_gone_mid_stream_harms_nobody(hub: HubThread) -> None:
    good = receiver(hub.path)
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.connect(str(hub.path))
    gone.sendall(encode(Hello(0, 0)))
    eventually(lambda: hub.on_loop(lambda: sum(p.live for p in hub.hub.peers)) == 2)
    hub.publish(10, size=50_000)
    gone.recv(1000)  # part of the stream, then it goes
    gone.close()
    hub.publish(10, size=50_000)
    assert take(good, 20) == list(range(1, 21))
    eventually(lambda: hub.on_loop(lambda: len(hub.hub.peers)) == 1)
    good.close()


def test_a_slow_participant_is_cut_off_then_catches_up_with_nothing_lost_or_twice(
    tmp_path: Path,
) -> None:
    # A small queue and a small memory: the slow one is cut off and its catch-up comes
    # partly from the server (fetch), partly from memory.
    hub = HubThread(
        tmp_path / "relay.sock", queue_bytes=64 * 1024, ring_bytes=100 * 1024, fetch_limit=7
    )
    try:
        fast, slow = receiver(hub.path), receiver(hub.path)
        eventually(lambda: hub.on_loop(lambda: sum(p.live for p in hub.hub.peers)) == 2)
        got_fast: list[int] = []
        for _ in range(10):  # `slow` reads nothing meanwhile
            hub.publish(10, size=10_000)
            got_fast += take(fast, 10)
        assert got_fast == list(range(1, 101))
        assert hub.hub.counters["dropped_too_slow"] == 1
        assert take(slow, 100) == list(range(1, 101))
        # Past the relay's memory, from the server, in several bounded fetches.
        assert len(hub.fetches) >= 2, hub.fetches
        assert slow.counters["relay_lost"] == 1
        fast.close()
        slow.close()
    finally:
        hub.stop()


def test_a_participant_ahead_of_a_restarted_relay_gets_nothing_twice(hub: HubThread) -> None:
    r = receiver(hub.path)
    hub.publish(5)
    assert take(r, 5) == [1, 2, 3, 4, 5]
    # The relay restarts from an older state: it sends 4 and 5 again, then 6.
    hub.loop.call_soon_threadsafe(hub.hub.close, "restart")
    hub.on_loop(lambda: setattr(hub.hub, "next_uid", 4))
    again = [(4, hub.mails[4]), (5, hub.mails[5]), (6, b"6:new")]
    eventually(lambda: r.receive(0.1) == [] and r.counters["relay_lost"] == 1)
    # It reconnects (back-off) saying it has 5; the relay, at 4, has nothing to catch up.
    eventually(lambda: r.receive(0.1) == [] and r.counters["connections_opened"] == 2)
    eventually(lambda: hub.on_loop(lambda: sum(p.live for p in hub.hub.peers)) == 1)
    hub.loop.call_soon_threadsafe(hub.hub.publish, UIDVALIDITY, again, 7)
    assert take(r, 1) == [6]
    assert r.counters["duplicates_dropped"] == 2
    r.close()


def test_a_recreated_mailbox_is_read_again_from_its_first_uid(hub: HubThread) -> None:
    r = receiver(hub.path)
    hub.publish(3)
    assert take(r, 3) == [1, 2, 3]
    # The relay's reader found another UIDVALIDITY: it reads from UID 1 again.
    renumbered = [(1, b"1:again"), (2, b"2:again")]
    hub.loop.call_soon_threadsafe(hub.hub.publish, UIDVALIDITY + 1, renumbered, 3)
    assert take(r, 2) == [1, 2]
    assert r.uidvalidity == UIDVALIDITY + 1 and r.counters["duplicates_dropped"] == 0
    r.close()
