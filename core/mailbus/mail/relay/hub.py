"""The relay's fan-out (asyncio): every participant connection, the recent mail in
memory, and the catch-up of a participant that missed some.

The reading thread hands each batch to `publish` (on the loop). Each MAIL frame is
encoded once and written to every live participant's transport. A participant whose
unsent bytes would pass `queue_bytes` is too slow: the relay aborts its connection
(its queue is dropped, so memory stays bounded) and the participant reconnects. On
(re)connection a participant says the last UID it has; the relay sends what came after
from `ring` (the last `ring_bytes` of mail) or, older than that, re-reads it from the
IMAP server through `fetch` (one call at a time, on a worker thread), then puts it live.
A participant's NUDGE (it has just sent mail) is passed to `on_nudge`, which makes the
reader poll at once instead of waiting for the server's IDLE announcement.
Nothing is lost while the mail is on the server, and a participant drops UIDs it has
already, so nothing is delivered twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from mailbus.mail.kinds import MailKind
from mailbus.mail.relay.codec import (
    PARTICIPANT_SENDS,
    Bye,
    Decoder,
    Hello,
    Mail,
    Nudge,
    RelayProtocolError,
    Welcome,
    encode,
)
from mailbus.trace import Tracer

# (uidvalidity, first, last) -> the mails with UIDs from first, in order, and the last
# UID they cover (at most `last`: a fetch may stop early to bound memory); blocking.
Fetch = Callable[[int, int, int], tuple[list[tuple[int, bytes]], int]]
HELLO_TIMEOUT_S = 5.0
FETCH_CHUNK = 500


@dataclass(eq=False)
class Peer:
    number: int
    writer: asyncio.StreamWriter
    live: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def pending(self) -> int:
        return self.writer.transport.get_write_buffer_size()


class Hub:
    def __init__(
        self,
        fetch: Fetch,
        tracer: Tracer,
        *,
        uidvalidity: int,
        next_uid: int,
        queue_bytes: int,
        ring_bytes: int,
        on_nudge: Callable[[], None] = lambda: None,
    ) -> None:
        self.fetch = fetch
        self.on_nudge = on_nudge
        self.tracer = tracer
        self.uidvalidity = uidvalidity
        self.next_uid = next_uid  # every UID below it has been published
        self.queue_bytes = queue_bytes
        self.ring_bytes = ring_bytes
        self.counters: Counter[str] = Counter()
        self.peers: set[Peer] = set()
        self._ring: deque[tuple[int, bytes]] = deque()  # (uid, encoded MAIL frame)
        self._ring_size = 0
        self._ring_from = next_uid  # every mail with a UID in [ring_from, next_uid) is in ring
        self._numbers = itertools.count(1)
        self._fetching = asyncio.Lock()  # one extra IMAP connection at most

    # -- from the reading thread ---------------------------------------------------------
    def publish(self, uidvalidity: int, mails: list[tuple[int, bytes]], next_uid: int) -> None:
        if uidvalidity != self.uidvalidity:
            # The mailbox was recreated: old UIDs mean nothing, start the memory afresh.
            self.uidvalidity = uidvalidity
            self._ring.clear()
            self._ring_size = 0
            self._ring_from = mails[0][0] if mails else next_uid
        for uid, data in mails:
            frame = encode(Mail(uidvalidity, uid, data))
            self._remember(uid, frame)
            self.counters["mails"] += 1
            for peer in [p for p in self.peers if p.live]:
                if peer.pending() + len(frame) > self.queue_bytes:
                    self._drop(peer, "too slow", f"over {self.queue_bytes} bytes unsent")
                    continue
                peer.writer.write(frame)
                self.counters["frames_sent"] += 1
        self.next_uid = next_uid

    def _remember(self, uid: int, frame: bytes) -> None:
        self._ring.append((uid, frame))
        self._ring_size += len(frame)
        while self._ring_size > self.ring_bytes and len(self._ring) > 1:
            old, dropped = self._ring.popleft()
            self._ring_size -= len(dropped)
            self._ring_from = old + 1

    # -- one participant -----------------------------------------------------------------
    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(next(self._numbers), writer)
        try:
            decoder = Decoder(PARTICIPANT_SENDS, 0)
            hello = await asyncio.wait_for(self._hello(reader, decoder), HELLO_TIMEOUT_S)
        except (
            RelayProtocolError,
            TimeoutError,
            ConnectionError,
            asyncio.IncompleteReadError,
        ) as exc:
            self.counters["refused"] += 1
            self._trace_drop(peer, "refused", f"no valid HELLO: {exc!r}")
            with contextlib.suppress(ConnectionError, RuntimeError):
                writer.write(encode(Bye(f"protocol error: {exc}")))
            writer.close()
            return
        self.peers.add(peer)
        self.counters["joined"] += 1
        try:
            try:
                await self._start(peer, hello)
            except (ConnectionError, RelayProtocolError):
                raise
            except Exception as exc:  # the IMAP server failed the catch-up: try later
                self._drop(peer, "catch-up failed", repr(exc))
                return
            # After HELLO a participant sends only NUDGEs; the end of its stream is
            # its leaving.
            listening = asyncio.ensure_future(self._listen(reader, decoder))
            done = asyncio.ensure_future(peer.done.wait())
            await asyncio.wait({listening, done}, return_when=asyncio.FIRST_COMPLETED)
            done.cancel()
            if not listening.done():
                listening.cancel()
            elif not peer.done.is_set():
                failed = listening.exception()
                if isinstance(failed, RelayProtocolError):
                    self._drop(peer, "garbage", str(failed))
                else:
                    self._drop(peer, "gone", "closed" if failed is None else repr(failed))
        except (ConnectionError, RelayProtocolError, OSError) as exc:
            self._drop(peer, "gone", repr(exc))
        finally:
            self.peers.discard(peer)
            writer.close()

    async def _hello(self, reader: asyncio.StreamReader, decoder: Decoder) -> Hello:
        while True:
            data = await reader.read(64)
            if not data:
                raise ConnectionError("closed before HELLO")
            decoder.feed(data)
            frame = decoder.next_frame()
            if isinstance(frame, Hello):
                return frame
            if frame is not None:
                raise RelayProtocolError(f"{type(frame).__name__} before HELLO")

    async def _listen(self, reader: asyncio.StreamReader, decoder: Decoder) -> None:
        """Until the participant closes its side: NUDGEs, passed to `on_nudge`."""
        while True:
            while (frame := decoder.next_frame()) is not None:
                if not isinstance(frame, Nudge):
                    raise RelayProtocolError(f"{type(frame).__name__} after HELLO")
                self.counters["nudges"] += 1
                self.on_nudge()
            data = await reader.read(4096)
            if not data:
                return
            decoder.feed(data)

    async def _start(self, peer: Peer, hello: Hello) -> None:
        uidvalidity = self.uidvalidity
        peer.writer.write(encode(Welcome(uidvalidity, self.next_uid)))
        resumes = hello.uidvalidity == uidvalidity and hello.uidvalidity != 0
        position = hello.last_uid + 1 if resumes else self.next_uid
        self.tracer.event(
            MailKind.RELAY_JOINED,
            detail=f"participant {peer.number} from UID {position}",
            extra={"last_uid": hello.last_uid, "catch_up": max(0, self.next_uid - position)},
        )
        while position < self.next_uid and self.uidvalidity == uidvalidity:
            if peer.done.is_set():
                return
            if position >= self._ring_from:
                # From memory, with no await before going live: nothing slips between.
                for uid, frame in self._ring:
                    if uid >= position:
                        peer.writer.write(frame)
                        self.counters["caught_up_from_memory"] += 1
                break
            last = min(self._ring_from - 1, position + FETCH_CHUNK - 1)
            async with self._fetching:
                mails, through = await asyncio.to_thread(self.fetch, uidvalidity, position, last)
            for uid, data in mails:
                peer.writer.write(encode(Mail(uidvalidity, uid, data)))
                self.counters["caught_up_from_server"] += 1
            await peer.writer.drain()
            position = max(position, min(through, last)) + 1
        peer.live = True

    def _drop(self, peer: Peer, reason: str, detail: str) -> None:
        if peer.done.is_set():
            return
        peer.done.set()
        peer.live = False
        self.peers.discard(peer)
        self.counters[f"dropped_{reason.replace(' ', '_')}"] += 1
        self._trace_drop(peer, reason, detail)
        # abort, not close: a slow participant's queue is dropped, not flushed.
        peer.writer.transport.abort()

    def _trace_drop(self, peer: Peer, reason: str, detail: str) -> None:
        self.tracer.event(
            MailKind.RELAY_DROPPED,
            detail=f"participant {peer.number}: {reason} ({detail})",
            extra={"reason": reason},
        )

    def close(self, reason: str) -> None:
        """Tell every participant goodbye (they reconnect with back-off)."""
        frame = encode(Bye(reason))
        for peer in list(self.peers):
            peer.done.set()
            with contextlib.suppress(ConnectionError, RuntimeError):
                peer.writer.write(frame)
                peer.writer.close()
        self.peers.clear()
