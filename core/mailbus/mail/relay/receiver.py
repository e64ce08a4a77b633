"""`RelayReceiver`: a participant's receiver that reads from the host relay instead of
holding an IMAP connection of its own.

It remembers the UIDVALIDITY and the last UID it received. On every (re)connection it
tells the relay so in HELLO, and the relay sends what came after; a UID at or below the
last one is dropped, so a relay that restarts from an older state delivers nothing twice.
No relay at start is an error that says how to start one; a relay lost later is retried
with capped back-off (`mail.relay_lost`), and a wait ends at once on `wake()` (a pipe
beside the socket), so an idle participant costs one wake-up per `idle_wait_s`.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mailbus.backoff import Backoff
from mailbus.email_message import Email
from mailbus.errors import TransportError
from mailbus.mail.imap_receiver import DEFAULT_MAX_MESSAGE_BYTES
from mailbus.mail.kinds import MailKind
from mailbus.mail.relay.codec import (
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
from mailbus.mail.relay.config import socket_path
from mailbus.options import Options
from mailbus.trace import Tracer
from mailbus.transport import EmailReceiver, EmailSender, Inbound, RawEmail

HANDSHAKE_TIMEOUT_S = 5.0
# One NUDGE starts the relay's fast polling for its quiet time (2 s by default): more
# often than this is no news.
NUDGE_EVERY_S = 0.5
READ_BYTES = 256 * 1024
NUDGE_FRAME = encode(Nudge())


class RelayUnavailableError(TransportError):
    """No relay answers on the socket."""


class RelayReceiver(EmailReceiver):
    idle_wait_s = 2.0

    def __init__(
        self,
        path: Path,
        tracer: Tracer | None = None,
        *,
        max_message_bytes: int,
        backoff: Backoff | None = None,
    ) -> None:
        self.path = path
        self.tracer = tracer or Tracer()
        self.max_message_bytes = max_message_bytes
        self.backoff = backoff or Backoff(initial=0.1, maximum=10.0)
        self.counters: Counter[str] = Counter()
        self.uidvalidity = 0
        self.last_uid = 0
        self._sock: socket.socket | None = None
        self._decoder: Decoder | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._closed = False
        self._sock_lock = threading.Lock()  # nudge() comes from the sending threads
        self._last_nudge = -math.inf
        self._failures = 0
        self._retry_at = 0.0

    # -- connection ----------------------------------------------------------------------
    def connect(self) -> None:
        """Connect and shake hands; RelayUnavailableError (with the fix) if no relay."""
        self._check_owner()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            try:
                sock.connect(str(self.path))
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                raise RelayUnavailableError(
                    f"no mail relay listens on {self.path} ({exc.strerror}): "
                    "start it with `mailbus --config FILE mail-relay` (the same options "
                    'file), or remove share = "relay" from [mail]'
                ) from None
            except OSError as exc:
                raise RelayUnavailableError(
                    f"cannot reach the mail relay on {self.path}: {exc}"
                ) from None
            decoder = Decoder(RELAY_SENDS, self.max_message_bytes)
            sock.sendall(encode(Hello(self.uidvalidity, self.last_uid)))
            welcome = None
            while welcome is None:
                data = sock.recv(READ_BYTES)
                if not data:
                    raise RelayUnavailableError(f"the mail relay on {self.path} closed at once")
                decoder.feed(data)
                frame = decoder.next_frame()
                if isinstance(frame, Bye):
                    raise RelayUnavailableError(f"the mail relay refused: {frame.reason}")
                if frame is not None and not isinstance(frame, Welcome):
                    raise RelayProtocolError(f"expected WELCOME, got {type(frame).__name__}")
                welcome = frame
        except (TimeoutError, RelayProtocolError, OSError) as exc:
            sock.close()
            raise RelayUnavailableError(f"the mail relay on {self.path} failed: {exc}") from None
        except BaseException:
            sock.close()
            raise
        if welcome.uidvalidity != self.uidvalidity:
            # New here, or the mailbox was recreated: from the relay's position on.
            self.uidvalidity = welcome.uidvalidity
            self.last_uid = welcome.next_uid - 1
        sock.setblocking(False)
        with self._sock_lock:
            self._sock, self._decoder = sock, decoder
        self._failures = 0
        self.counters["connections_opened"] += 1
        self.tracer.event(
            MailKind.RELAY_CONNECTED, detail=str(self.path), extra={"last_uid": self.last_uid}
        )

    def _check_owner(self) -> None:
        """Refuse a socket someone else made: a relay of theirs would hand this
        participant whatever mail it likes."""
        try:
            owner = os.stat(self.path).st_uid
        except OSError:
            return  # no socket: connect() says so, with the fix
        if owner != os.getuid():
            raise RelayUnavailableError(
                f"{self.path} belongs to uid {owner}, not to this user: not a relay to trust"
            )

    def nudge(self) -> None:
        """Tell the relay that this participant has just sent mail (best effort)."""
        now = time.monotonic()
        with self._sock_lock:
            if self._sock is None or now - self._last_nudge < NUDGE_EVERY_S:
                return
            self._last_nudge = now
            try:
                self._sock.send(NUDGE_FRAME)
                self.counters["nudges"] += 1
            except OSError:
                pass  # the receiving thread sees the connection fail and reconnects

    def _lost(self, why: str) -> None:
        with self._sock_lock:
            sock, self._sock, self._decoder = self._sock, None, None
        if sock is not None:
            sock.close()
        self._failures += 1
        self.counters["relay_lost"] += 1
        delay = self.backoff.delay(self._failures, random.random())
        self._retry_at = time.monotonic() + delay
        self.tracer.event(
            MailKind.RELAY_LOST,
            detail=f"{why}; reconnecting in {delay:.1f} s",
            extra={"retry_in_s": delay},
        )

    # -- receiving -----------------------------------------------------------------------
    def receive(self, timeout: float | None) -> list[Inbound]:
        if self._closed:
            raise TransportError("relay receiver is closed")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            sock = self._sock
            if sock is None and now >= self._retry_at:
                try:
                    self.connect()
                except TransportError as exc:
                    self._lost(str(exc))
                    continue
                # WELCOME may have come with the first mails in one read.
                items = self._frames()
                if items:
                    return items
                continue
            until = min(deadline, self._retry_at) if sock is None else deadline
            wait = None if math.isinf(until) else max(0.0, until - now)
            watched: list[int | socket.socket] = (
                [self._wake_r] if sock is None else [self._wake_r, sock]
            )
            readable, _, _ = select.select(watched, [], [], wait)
            if self._wake_r in readable:
                self._drain_wake()
                return []
            if sock is not None and sock in readable:
                items = self._read(sock)
                if items:
                    return items
            if time.monotonic() >= deadline:
                return []

    def _read(self, sock: socket.socket) -> list[Inbound]:
        decoder = self._decoder
        assert decoder is not None
        try:
            data = sock.recv(READ_BYTES)
        except BlockingIOError:
            return []
        except OSError as exc:
            self._lost(f"relay connection failed: {exc}")
            return []
        if not data:
            self._lost("the relay closed the connection")
            return []
        try:
            decoder.feed(data)
        except RelayProtocolError as exc:
            self._lost(f"the relay spoke garbage: {exc}")
            return []
        return self._frames()

    def _frames(self) -> list[Inbound]:
        decoder = self._decoder
        out: list[Inbound] = []
        if decoder is None:
            return out
        try:
            while (frame := decoder.next_frame()) is not None:
                if isinstance(frame, Mail):
                    item = self._accept(frame)
                    if item is not None:
                        out.append(item)
                elif isinstance(frame, Bye):
                    self._lost(f"the relay said goodbye: {frame.reason}")
                    return out
                else:
                    raise RelayProtocolError(f"unexpected {type(frame).__name__}")
        except RelayProtocolError as exc:
            self._lost(f"the relay spoke garbage: {exc}")
        return out

    def _accept(self, mail: Mail) -> RawEmail | None:
        if mail.uidvalidity == self.uidvalidity and mail.uid <= self.last_uid:
            self.counters["duplicates_dropped"] += 1
            return None
        self.uidvalidity, self.last_uid = mail.uidvalidity, mail.uid
        self.counters["fetched"] += 1
        self.counters["bytes_received"] += len(mail.data)
        return RawEmail(mail.data, origin=f"uid:{mail.uid}")

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def wake(self) -> None:
        # A full pipe is already a wake-up; a closed one belongs to a closed receiver.
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.wake()
        with self._sock_lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
        os.close(self._wake_r)
        os.close(self._wake_w)


def relay_receiver(options: Options, section: Mapping[str, Any], tracer: Tracer) -> RelayReceiver:
    """The receiver of `[mail] share = "relay"` (not connected yet)."""
    cap = section.get("reconnect-max-s", 10.0)
    return RelayReceiver(
        socket_path(options, section),
        tracer,
        max_message_bytes=section.get("max-message-bytes", DEFAULT_MAX_MESSAGE_BYTES),
        backoff=Backoff(initial=min(0.1, cap), maximum=cap),
    )


class NudgingSender(EmailSender):
    """A participant's sender that NUDGEs its relay after each send, so that the relay
    polls at once instead of waiting in IDLE for the server to announce the mail.
    Everything else (flush, counters, ...) is the wrapped sender's."""

    def __init__(self, sender: EmailSender, receiver: RelayReceiver) -> None:
        self.sender = sender
        self._receiver = receiver

    def deliver(self, email: Email) -> None:
        self.sender.deliver(email)
        self._receiver.nudge()

    def close(self) -> None:
        self.sender.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sender, name)
