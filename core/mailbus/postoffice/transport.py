"""The engine's transport over a PostOffice daemon: emails travel as letters.

Options, in the `[postoffice]` table:

    [postoffice]
    host = "127.0.0.1"       # the daemon (default 127.0.0.1:8228)
    port = 8228
    box = "robot.arm"        # this participant's mailbox, created if missing
    password = "..."         # or MAILBUS_POSTOFFICE_PASSWORD (which wins)
    group = "robot"          # default: the box's parent ("robot" for "robot.arm")
    peers = []               # if set: send topics and requests to these boxes instead
    create = true            # create the boxes when they do not exist
    timeout-s = 10.0         # network timeout
    idle-wait-s = 1.0        # shortest GETMAIL wait (see below)
    keep-boxes = false       # true: leave the boxes this participant created on close
    observe-responses = true # responses go to the group: observers see every answer
    send-queue = 10000       # letters waiting while the daemon is unreachable, at most
    retry-for-s = 300.0      # ... and for at most this long each (then given up)

Who receives what: a topic message or a service request goes to the *group*. The daemon
delivers a letter addressed to a group name that is not a box to every box one level
below it (`robot` reaches `robot.arm` and `robot.cam`), so a participant joins simply by
creating its box under the group, and nobody keeps a list of subscribers: every member
gets every message of the group and its engine keeps those it has subscriptions or
servers for. A response goes to the group too when the client that asked is a member
(`observe-responses`, the default): the client gets it as it would in its own box, and
observers (the workbench, `mailbus record`, a notebook) see every answer, not only
their own; the other members' engines drop it (no client of theirs asked). It costs one
letter per member instead of one; `observe-responses = false` sends it to the asker's
box only (and observers then see requests without their answers).

A connection can hold one mailbox, and receiving keeps one connection waiting in
GETMAIL, so a participant uses two: its inbox `<box>` for receiving and `<box>.out` for
sending. The daemon stamps every letter with the box it came from, so the receiving
side takes the reply address from that stamp (`robot.cam.out` -> `robot.cam@postoffice`)
rather than from the email's From header, which a sender could forge.

The engine's polling thread calls `receive(period)` in a loop, with a period of 10 ms by
default. One GETMAIL per call would make an idle participant cost the daemon a hundred
round trips a second, so a wait shorter than `idle-wait-s` is stretched to it: letters are
handed on the moment they arrive whatever the wait, and `wake()` ends the wait at once
(an empty letter to our own inbox, or, if that cannot be sent, the receiving socket is
shut down), which is all the engine needs to stop the thread promptly.
"""

from __future__ import annotations

import dataclasses
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mailbus.email_message import Email, encode, from_bytes, to_bytes
from mailbus.errors import ConfigError, CredentialsRefused, EmailFormatError, TransportError
from mailbus.options import Options
from mailbus.postoffice.background import (
    DEFAULT_MAX_PENDING,
    DEFAULT_RETRY_FOR_S,
    BackgroundDelivery,
    Undeliverable,
)
from mailbus.postoffice.client import (
    BoxExists,
    BoxInUse,
    CommTimeout,
    ConnectionLost,
    DeliveryFailed,
    NoSuchBox,
    NotAuthorized,
    PostOfficeClient,
    PostOfficeError,
)
from mailbus.postoffice.kinds import PostOfficeKind
from mailbus.postoffice.protocol import DEFAULT_PORT, IDENTIFIER
from mailbus.postoffice.routing import send_targets
from mailbus.registry import TRANSPORTS
from mailbus.tls import client_context
from mailbus.trace import Tracer
from mailbus.transport import EmailReceiver, EmailSender, Inbound, RawEmail, Transport

PASSWORD_ENV = TRANSPORTS["postoffice"].secret_environment[0]
ADDRESS_DOMAIN = "postoffice"
SEND_SUFFIX = ".out"
MAX_BATCH = 1000
DEFAULT_MAX_LETTER_BYTES = 16 * 1024 * 1024  # ServerConfig.max_letter_bytes


@dataclass(frozen=True, slots=True)
class PostOfficeOptions:
    box: str
    password: str = field(repr=False)
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    group: str = ""
    peers: tuple[str, ...] = ()
    create: bool = True
    timeout_s: float = 10.0
    idle_wait_s: float = 1.0  # a shorter receive wait is stretched to this
    keep_boxes: bool = False  # leave the boxes we created when we close
    observe_responses: bool = True  # responses to the group (observers see them)
    send_queue: int = DEFAULT_MAX_PENDING
    retry_for_s: float = DEFAULT_RETRY_FOR_S
    # The daemon's letter limit (its --max-letter-bytes, 16 MiB by default): a larger
    # letter is refused here, before it is queued, not lost on the delivery thread.
    max_letter_bytes: int = DEFAULT_MAX_LETTER_BYTES
    # TLS (tls = true): the daemon's certificate is verified against ca-file (else the
    # system's trust store) for server-name (else host); cert-file/key-file for mutual TLS.
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    server_name: str = ""

    def client(self) -> PostOfficeClient:
        """A connection to the daemon these options name."""
        return PostOfficeClient(
            self.host, self.port, timeout=self.timeout_s, tls=self.tls, server_name=self.server_name
        )

    @property
    def send_box(self) -> str:
        return self.box + SEND_SUFFIX

    @classmethod
    def from_options(
        cls, options: Options, environ: Mapping[str, str] | None = None
    ) -> PostOfficeOptions:
        env = os.environ if environ is None else environ
        table: Mapping[str, Any] = options.sections.get("postoffice", {})
        known = {
            "host",
            "port",
            "box",
            "password",
            "group",
            "peers",
            "create",
            "timeout-s",
            "idle-wait-s",
            "keep-boxes",
            "send-queue",
            "retry-for-s",
            "max-letter-bytes",
            "observe-responses",
            "tls",
            "ca-file",
            "tls-verify",
            "cert-file",
            "key-file",
            "server-name",
        }
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"postoffice.{unknown[0]}", "unknown key")

        def get(key: str, kind: type, default: Any) -> Any:
            value = table.get(key, default)
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise ConfigError(f"postoffice.{key}", f"expected {kind.__name__}")
            return value

        box = get("box", str, "")
        if not box:
            raise ConfigError("postoffice.box", "required: this participant's mailbox name")
        password = env.get(PASSWORD_ENV) or get("password", str, "")
        if not password:
            raise ConfigError("postoffice.password", f"required (or set {PASSWORD_ENV})")
        port = get("port", int, DEFAULT_PORT)
        if not 0 < port < 65536:
            raise ConfigError("postoffice.port", f"must be 1-65535, got {port}")
        peers = get("peers", list, [])
        if not all(isinstance(p, str) for p in peers):
            raise ConfigError("postoffice.peers", "expected a list of mailbox names")
        group = get("group", str, box.rpartition(".")[0])
        for key, name in [("box", box), ("group", group), *(("peers", p) for p in peers)]:
            if name and not IDENTIFIER.fullmatch(name):
                raise ConfigError(f"postoffice.{key}", f"{name!r} is not a mailbox name (a.b.c)")
        if not group and not peers:
            raise ConfigError("postoffice.group", "a box without a parent needs group or peers")
        timeout = get("timeout-s", float, 10.0)
        if not 0 < timeout <= 3600:
            raise ConfigError("postoffice.timeout-s", "must be > 0 and at most an hour")
        idle_wait = get("idle-wait-s", float, 1.0)
        if not 0 <= idle_wait <= 3600:
            raise ConfigError("postoffice.idle-wait-s", "must be >= 0 and at most an hour")
        send_queue = get("send-queue", int, DEFAULT_MAX_PENDING)
        if not 1 <= send_queue <= 10_000_000:
            raise ConfigError("postoffice.send-queue", "must be 1 to 10,000,000 letters")
        retry_for = get("retry-for-s", float, DEFAULT_RETRY_FOR_S)
        if not 0 < retry_for <= 7 * 86400:
            raise ConfigError("postoffice.retry-for-s", "must be > 0 and at most a week")
        max_letter = get("max-letter-bytes", int, DEFAULT_MAX_LETTER_BYTES)
        if not 0 < max_letter <= 0xFFFFFFFF:
            raise ConfigError("postoffice.max-letter-bytes", "must be 1 to 4,294,967,295")
        return cls(
            max_letter_bytes=max_letter,
            box=box,
            password=password,
            host=get("host", str, "127.0.0.1"),
            port=port,
            group=group,
            peers=tuple(peers),
            create=get("create", bool, True),
            timeout_s=timeout,
            idle_wait_s=idle_wait,
            keep_boxes=get("keep-boxes", bool, False),
            send_queue=send_queue,
            retry_for_s=retry_for,
            observe_responses=get("observe-responses", bool, True),
            tls=_tls(get) if get("tls", bool, False) else None,
            server_name=get("server-name", str, ""),
        )


def _tls(get: Callable[[str, type, Any], Any]) -> ssl.SSLContext:
    return client_context(
        ca_file=get("ca-file", str, ""),
        verify=get("tls-verify", bool, True),
        cert_file=get("cert-file", str, ""),
        key_file=get("key-file", str, ""),
        key="postoffice",
    )


def box_address(box: str) -> str:
    return f"{box}@{ADDRESS_DOMAIN}"


def address_box(address: str) -> str | None:
    """The mailbox an address names (`robot.arm@postoffice`), or None."""
    local, _, domain = address.rpartition("@")
    if domain.lower() == ADDRESS_DOMAIN and IDENTIFIER.fullmatch(local):
        return local
    return None


def reply_box(sender_box: str) -> str:
    """Where replies to a letter from `sender_box` go: its owner's inbox."""
    return sender_box.removesuffix(SEND_SUFFIX) if sender_box.endswith(SEND_SUFFIX) else sender_box


class _Connection:
    """One client connection holding one box, reconnected on demand."""

    def __init__(self, opts: PostOfficeOptions, box: str, tracer: Tracer, side: str) -> None:
        self.opts = opts
        self.box = box
        self.tracer = tracer
        self.side = side
        self.client: PostOfficeClient | None = None
        self.created = False  # we created the box (it did not exist): ours to remove

    def trace(self, kind: str, **fields: Any) -> None:
        if self.tracer.active:
            extra = {"side": "participant", "connection": self.side, **fields.pop("extra", {})}
            self.tracer.event(kind, name=fields.pop("name", self.box), extra=extra, **fields)

    def get(self) -> PostOfficeClient:
        if self.client is not None and self.client.connected:
            return self.client
        self.client = None
        opts = self.opts
        client = opts.client()
        try:
            if opts.create:
                try:
                    client.create_box(self.box, opts.password)
                    self.created = True
                    self.trace(PostOfficeKind.BOX_CREATED)
                except BoxExists:
                    pass
            client.check_out(self.box, opts.password)
        except NotAuthorized:
            client.close()
            self.trace(PostOfficeKind.AUTH_FAILED, detail="wrong password for the box")
            raise CredentialsRefused(
                f"PostOffice refused the password for box {self.box!r}"
            ) from None
        except BoxInUse:
            client.close()
            raise TransportError(f"box {self.box!r} is checked out by another connection") from None
        except NoSuchBox:
            client.close()
            # CREATEBOX said BOXEXISTS but there is no such box: the daemon refused it.
            why = " (the daemon refused to create it: see its log)" if opts.create else ""
            raise TransportError(f"PostOffice has no box {self.box!r}{why}") from None
        except PostOfficeError as exc:
            client.close()
            self._note(exc)
            raise TransportError(f"PostOffice at {opts.host}:{opts.port}: {exc}") from exc
        self.trace(PostOfficeKind.CHECKED_OUT)
        self.client = client
        return client

    def _note(self, exc: PostOfficeError) -> None:
        if isinstance(exc, CommTimeout):
            self.trace(PostOfficeKind.TIMEOUT, detail=str(exc))

    def failed(self, exc: PostOfficeError) -> None:
        self._note(exc)
        if isinstance(exc, ConnectionLost | CommTimeout) or (
            self.client is not None and not self.client.connected
        ):
            self.client = None

    def close(self) -> None:
        """Return the box; remove it (letters and all) if we created it, unless told to
        keep it. A box that existed before us is someone else's: it stays."""
        client, self.client = self.client, None
        if client is None:
            return
        if self.created and not self.opts.keep_boxes and client.connected:
            try:
                client.remove()
                self.trace(PostOfficeKind.BOX_REMOVED, detail="created by this participant")
            except PostOfficeError as exc:  # it stays for the daemon's idle expiry
                self.trace(PostOfficeKind.BOX_KEPT, detail=f"could not remove it: {exc}")
        client.close()
        self.trace(PostOfficeKind.RETURNED, detail="transport closed")


class PostOfficeSender(EmailSender):
    """Sends in the background (see postoffice.background): a daemon restart costs the
    publisher a wait, not an exception. `send_sync` sends at once, for the outbox."""

    def __init__(self, opts: PostOfficeOptions, tracer: Tracer) -> None:
        self.opts = opts
        self._conn = _Connection(opts, opts.send_box, tracer, "send")
        self.max_email_bytes = opts.max_letter_bytes
        self.limit_option = "postoffice.max-letter-bytes, the daemon's --max-letter-bytes"
        self._lock = threading.Lock()
        self._closed = False
        self.sent = 0
        self.delivery = BackgroundDelivery(
            self._send, tracer, max_pending=opts.send_queue, retry_for_s=opts.retry_for_s
        )

    def targets(self, email: Email) -> list[str]:
        return send_targets(
            [box for box in map(address_box, email.recipients) if box],
            self.opts.group,
            self.opts.peers,
            is_response=bool(email.in_reply_to),
            observe_responses=self.opts.observe_responses,
        )

    def deliver(self, email: Email) -> None:
        """Queue `email` for the delivery thread."""
        data = encode(email)
        self.check_size(len(data))
        self.delivery.put(self.targets(email), data, email.message_id, email.subject)

    def send_sync(self, email: Email) -> None:
        """Send `email` now; TransportError if the daemon cannot take it."""
        data = to_bytes(email)
        self.check_size(len(data))
        for target in self.targets(email):
            self._send(target, data)

    def flush(self, timeout: float | None = None) -> bool:
        return self.delivery.flush(timeout)

    def _send(self, target: str, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise TransportError("the PostOffice sender is closed")
            for attempt in (1, 2):  # one reconnect: the daemon may have restarted
                client = self._conn.get()
                try:
                    client.send(target, data)
                    break
                except DeliveryFailed:
                    raise Undeliverable(f"PostOffice could not deliver to {target!r}") from None
                except PostOfficeError as exc:
                    self._conn.failed(exc)
                    if attempt == 2 or self._conn.client is not None:
                        raise TransportError(f"sending to {target!r} failed: {exc}") from exc
            self.sent += 1
        self._conn.trace(PostOfficeKind.LETTER_IN, size=len(data), extra={"to": target})

    def wake_receiver(self) -> bool:
        """An empty letter to our own inbox makes a receiver blocked in GETMAIL return.
        False if it could not be sent."""
        try:
            self._send(self.opts.box, b"")
        except TransportError:
            return False
        return True

    def close(self) -> None:
        self.delivery.close(timeout=min(self.opts.timeout_s, 5.0))
        with self._lock:
            self._closed = True
            self._conn.close()


class PostOfficeReceiver(EmailReceiver):
    def __init__(self, opts: PostOfficeOptions, tracer: Tracer, sender: PostOfficeSender) -> None:
        self.opts = opts
        self._conn = _Connection(opts, opts.box, tracer, "receive")
        self._sender = sender
        self._lock = threading.Lock()
        self._closed = False
        self._woken = threading.Event()

    def _convert(self, sender_box: str, payload: bytes) -> Inbound:
        try:
            email = from_bytes(payload)
        except EmailFormatError:
            return RawEmail(payload, origin=f"postoffice letter from {sender_box}")
        # The daemon's stamp, not the From header, says who sent it.
        return dataclasses.replace(email, sender=box_address(reply_box(sender_box)))

    def receive(self, timeout: float | None) -> list[Inbound]:
        """Letters as emails, waiting for the first up to `timeout`, or `idle-wait-s` if
        that is longer (0 still only takes what is waiting): `wake()` ends the wait."""
        wait = 3600.0 if timeout is None else max(0.0, timeout)
        if 0 < wait < self.opts.idle_wait_s:
            wait = self.opts.idle_wait_s
        items: list[Inbound] = []
        with self._lock:
            if self._closed:
                return []
            if self._woken.is_set():  # woken before the wait began
                self._woken.clear()
                return []
            client = self._conn.get()
            try:
                # Wait for the first letter, then take what else is waiting at once.
                for wait_s in (wait, 0.0):
                    for letter in client.get_mail(wait_s):
                        if letter.payload or letter.sender != self.opts.send_box:
                            items.append(self._convert(letter.sender, letter.payload))
                            self._conn.trace(
                                PostOfficeKind.LETTER_OUT,
                                size=len(letter.payload),
                                extra={"sender": letter.sender},
                            )
                        if wait_s or len(items) >= MAX_BATCH:
                            break  # SATIATED: the rest is taken on the next round
                    if not items:
                        break
                self._woken.clear()  # a wake-up during this wait is served by its return
            except PostOfficeError as exc:
                self._conn.failed(exc)
                if items:
                    return items
                raise TransportError(f"receiving from box {self.opts.box!r}: {exc}") from exc
        return items

    def wake(self) -> None:
        """End a wait in `receive` at once (from any thread)."""
        self._woken.set()
        if not self._sender.wake_receiver():
            # No wake-up letter (the sender is closed or cut off): shut the receiving
            # socket down instead. A letter in flight stays in the box for next time.
            client = self._conn.client
            if client is not None:
                client.abort()

    def close(self) -> None:
        self._closed = True
        woken = self._sender.wake_receiver()
        # If the wake-up letter could not go (the sender is closed already) and another
        # thread is still blocked in GETMAIL, cut its socket: its letter in flight stays
        # in the box for next time.
        if not self._lock.acquire(timeout=2.0 if woken else 0.0):
            client = self._conn.client
            if client is not None:
                client.abort()
            self._lock.acquire()
        try:
            self._conn.close()
        finally:
            self._lock.release()


def create_transport(options: Options, tracer: Tracer) -> Transport:
    opts = PostOfficeOptions.from_options(options)
    sender = PostOfficeSender(opts, tracer)
    receiver = PostOfficeReceiver(opts, tracer, sender)
    try:
        receiver._conn.get()  # fail now, with a clear error, if the daemon is not there
        sender._conn.get()
    except BaseException:  # Ctrl-C too: the boxes we created go with the connections
        sender.close()
        receiver.close()
        raise
    return Transport(sender, receiver, name="postoffice")
