"""The IMAP receiver: imapclient on one connection, the inbox examined read-only.

Strategy (figures in docs/mail.md and docs/benchmarks.md): a poll is a NOOP, one
round trip; only when the server answers it with EXISTS (new mail), `UID FETCH
next:* (UID RFC822.SIZE)`, then `UID FETCH <new uids> (UID BODY.PEEK[]<0.limit>)` for
the bodies. Sizes first, because `next:*` returns the highest message even when nothing
is new. NOOP rather than FETCH alone, because Dovecot shows new mail only after a
command completes (a FETCH alone sees it one poll late), and NOOP and FETCH pipelined
do not help: Dovecot delays the sync until the pipeline is done. When to poll and
when to wait in IMAP IDLE is mailbus.mail.receive_schedule's call: by default fast
polls while mail flows, IDLE once the inbox is quiet (Dovecot announces new mail
about 0.5 s after delivery). An IDLE outlives `receive` calls: the engine's short
receive timeouts do not end it.

EXAMINE (read-only) leaves flags alone, so any number of participants and observers
can read one shared inbox. Bytes go to the engine as `RawEmail(data, origin="uid:N")`:
the engine's polling manager parses them and reports (with the UID) what is malformed
or foreign, so the stream never stalls on one bad mail. Mail larger than the limit is
reported here (`mail.oversized`) and skipped.

Lost connections are reopened with capped exponential back-off; the UID cursor
(mailbus.mail.uids) makes sure nothing is lost or delivered twice across reconnects.
"""

from __future__ import annotations

import imaplib
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import imapclient
from imapclient import exceptions as imap_errors

from mailbus.backoff import Backoff
from mailbus.errors import TransportError
from mailbus.mail import imap_wire
from mailbus.mail.errors import MailConnectError
from mailbus.mail.fetch_items import (  # re-exported: the tests import them from here
    SIZE_ITEMS,
    body_items,
    body_of,
    response_bytes,
    size_of,
)
from mailbus.mail.imap_session import (  # re-exported: ImapSettings is public here
    CONNECTION_ERRORS,
    ImapSettings,
    connection_limit_refusal,
    open_session,
    shut,
    uid_fetch,
)
from mailbus.mail.kinds import MailKind
from mailbus.mail.receive_schedule import ReceiveSchedule
from mailbus.mail.uids import (
    Resumed,
    Started,
    UidCursor,
    UidValidityChanged,
    uid_set,
)
from mailbus.trace import Tracer
from mailbus.transport import EmailReceiver, Inbound, RawEmail

__all__ = [
    "SIZE_ITEMS",
    "ImapReceiver",
    "ImapSettings",
    "body_items",
    "body_of",
    "connection_limit_refusal",
    "response_bytes",
]

log = logging.getLogger(__name__)

CONNECTED = MailKind.CONNECTED
DISCONNECTED = MailKind.DISCONNECTED
RECONNECT_FAILED = MailKind.RECONNECT_FAILED
UIDVALIDITY_CHANGED = MailKind.UIDVALIDITY_CHANGED
OVERSIZED = MailKind.OVERSIZED
IDLE = MailKind.IDLE
DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024
_CONNECTION_ERRORS = CONNECTION_ERRORS


class ImapReceiver(EmailReceiver):
    # wake() ends any wait within a quarter of a second (an IDLE checks it per slice).
    idle_wait_s = 1.0

    # Whether IDLE's EXPUNGE or NO makes the next poll check the examined mailbox (the
    # routed receiver reads many folders; NOTIFY brings NO about folders not there yet).
    watches_its_mailbox = True

    def __init__(
        self,
        settings: ImapSettings,
        tracer: Tracer | None = None,
        *,
        period_s: float = 0.01,
        start_uid: int | None = None,
        batch: int = 500,
        idle: str = "auto",
        max_period_s: float | None = None,
        quiet_s: float = 2.0,
        idle_recheck_s: float = 30.0,
        backoff: Backoff | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.schedule = ReceiveSchedule(
            idle,
            period_s,
            max(period_s, 0.08) if max_period_s is None else max_period_s,
            quiet_s,
            idle_recheck_s,
        )
        self.settings = settings
        self.tracer = tracer or Tracer()
        self.period_s = period_s
        self.cursor = UidCursor(start_uid, batch)
        self.backoff = backoff or Backoff(initial=0.1, maximum=10.0)
        self.max_message_bytes = max_message_bytes
        self.counters: Counter[str] = Counter()
        self._client: imapclient.IMAPClient | None = None
        self._woken = threading.Event()
        self._closed = False
        self._failures = 0
        self._retry_at = 0.0
        self._next_poll = 0.0
        self._idle_until: float | None = None  # in IDLE until then (monotonic)
        self._backlog = False  # the last poll read only a chunk of what is there
        self._just_polled = False  # no wait since the last poll: IDLE may start now
        self._fetch_due = True  # fetch at the next poll even if NOOP reports nothing
        self._check_mailbox = False  # IDLE saw EXPUNGE or NO: the next poll checks it
        self._quiet = False  # in IDLE since the last mail (mail.idle said so)

    # -- connection ----------------------------------------------------------------------
    def connect(self) -> None:
        """Open, authenticate and EXAMINE; raise a clear error on failure."""
        s = self.settings
        client = open_session(s, self.tracer)
        try:
            try:
                info = client.select_folder(s.mailbox, readonly=True)
            except imap_errors.IMAPClientError as exc:
                raise TransportError(f"cannot examine {s.mailbox!r} on {s.server}: {exc}") from None
            capabilities = client.capabilities()
        except _CONNECTION_ERRORS as exc:
            # The server went away or spoke garbage during EXAMINE.
            self._shut(client)
            raise MailConnectError(f"connection to {s.server} failed: {exc!r}") from None
        except BaseException:
            self._shut(client)
            raise
        self._client = client
        self._next_poll = 0.0  # poll at once after (re)connecting
        self._idle_until = None
        self._fetch_due = True
        self.schedule.connected(time.monotonic(), b"IDLE" in capabilities)
        event = self.cursor.selected(int(info[b"UIDVALIDITY"]), int(info.get(b"UIDNEXT", 1)))
        self.counters["connections_opened"] += 1
        if isinstance(event, UidValidityChanged):
            self.counters["uidvalidity_changed"] += 1
            self.tracer.event(
                UIDVALIDITY_CHANGED,
                detail=f"{s.mailbox} was recreated (UIDVALIDITY {event.old} -> {event.new}); "
                "reading it again from UID 1",
                extra={"old": event.old, "new": event.new},
            )
        elif isinstance(event, Started | Resumed):
            self.tracer.event(
                CONNECTED,
                detail=f"{s.server} {s.mailbox} from UID {event.first_uid}",
                extra={
                    "first_uid": event.first_uid,
                    "uidvalidity": event.uidvalidity,
                    "idle": self.schedule.can_idle and self.schedule.mode != "never",
                    "resumed": isinstance(event, Resumed),
                },
            )

    @staticmethod
    def _shut(client: imapclient.IMAPClient) -> None:
        shut(client)

    def _drop(self, exc: BaseException) -> None:
        client, self._client = self._client, None
        self._idle_until = None
        if client is not None:
            self._shut(client)
        self.counters["disconnects"] += 1
        self._failures = 1
        self._retry_at = time.monotonic() + self.backoff.delay(1, random.random())
        self.tracer.event(DISCONNECTED, detail=f"{self.settings.server}: {exc!r}")
        log.warning("IMAP connection to %s lost: %r", self.settings.server, exc)

    def _reconnect(self) -> bool:
        try:
            self.connect()
        except TransportError as exc:
            self._failures += 1
            delay = self.backoff.delay(self._failures, random.random())
            self._retry_at = time.monotonic() + delay
            self.counters["reconnect_failed"] += 1
            self.tracer.event(
                RECONNECT_FAILED,
                detail=f"{exc}; retry {self._failures} in {delay:.2f} s",
                extra={"attempt": self._failures, "retry_in_s": delay},
            )
            return False
        self._failures = 0
        return True

    # -- polling --------------------------------------------------------------------------
    def _uid_fetch(
        self, client: imapclient.IMAPClient, uids: str, items: list[bytes]
    ) -> dict[int, Any]:
        return uid_fetch(client, uids, items, self.counters)

    def poll(self) -> list[Inbound]:
        """NOOP; when it reports new mail (EXISTS), or a fetch is due anyway, the sizes
        of what is new, then the bodies of what is new and not too large. Raises on a
        broken connection (the cursor moves only after the bodies arrived, so a
        reconnect fetches them again)."""
        client = self._client
        if client is None:
            return []
        imap_wire.clear_untagged(client)
        imap_wire.command(client, "NOOP")
        check, self._check_mailbox = self._check_mailbox, False
        if check or any(imap_wire.has_untagged(client, k) for k in ("NO", "EXPUNGE")):
            # Dovecot answers NOOP with an untagged NO when the examined mailbox was
            # deleted (and maybe recreated) under it, and goes on showing the old one.
            # Cyrus expunges every message of a mailbox renamed away under its reader
            # and then shows it nothing for ever: after an EXPUNGE, ask whether the
            # name still holds the mailbox examined (one STATUS; EXPUNGE is rare here).
            self._check_uidvalidity(client)
        self.counters["polls"] += 1
        if not (self._fetch_due or imap_wire.has_untagged(client, "EXISTS")):
            imap_wire.clear_untagged(client)
            self._backlog = False
            return []  # an empty poll is one round trip
        imap_wire.clear_untagged(client)
        uids = self.cursor.next_range()
        sizes = self._uid_fetch(client, str(uids), SIZE_ITEMS)
        new = self.cursor.new_uids(sizes, uids)
        wanted = [uid for uid in new if size_of(sizes[uid]) <= self.max_message_bytes]
        bodies: dict[int, Any] = {}
        if wanted:
            bodies = self._uid_fetch(client, uid_set(wanted), body_items(self.max_message_bytes))
        # Mail that came during the FETCHes is announced there: fetch at the next poll.
        self._fetch_due = imap_wire.has_untagged(client, "EXISTS") or uids.last is not None
        imap_wire.clear_untagged(client)
        out: list[Inbound] = []
        self.cursor.accept(new, uids)  # the bodies are here: move past them
        for uid in new:
            item = self._inbound(uid, size_of(sizes[uid]), bodies.get(uid))
            if item is not None:
                out.append(item)
        self._backlog = uids.last is not None
        return out

    def _check_uidvalidity(self, client: imapclient.IMAPClient) -> None:
        """Raise (so the receiver reconnects) if the mailbox is not the one examined."""
        status = client.folder_status(self.settings.mailbox, [b"UIDVALIDITY"])
        if int(status[b"UIDVALIDITY"]) != self.cursor.uidvalidity:
            raise imap_errors.IMAPClientError(f"{self.settings.mailbox} was recreated")

    def _inbound(self, uid: int, size: int, data: Mapping[bytes, Any] | None) -> RawEmail | None:
        if size > self.max_message_bytes:
            self.counters["oversized"] += 1
            self.tracer.event(
                OVERSIZED,
                detail=f"uid:{uid} is {size} bytes, over the limit of {self.max_message_bytes}",
                extra={"origin": f"uid:{uid}", "size": size},
            )
            return None
        body = None if data is None else body_of(data)
        if body is None:
            # Expunged by another client between the two FETCHes: nothing to deliver.
            self.counters["vanished"] += 1
            log.info("uid:%d vanished before its body was fetched", uid)
            return None
        self.counters["fetched"] += 1
        return RawEmail(body, origin=f"uid:{uid}")

    # -- hooks for subclasses (the routed receiver, the relay's reader) ---------------
    def before_step(self, client: imapclient.IMAPClient, now: float) -> None:
        """Called before each poll or wait of `receive`, on its thread: a subclass may
        `leave_idle` and `poll_now` here. Does nothing by default."""

    def leave_idle(self, client: imapclient.IMAPClient) -> None:
        """End the IDLE the connection is in, if any."""
        if self._idle_until is not None:
            self._end_idle(client)

    def poll_now(self, *, fetch: bool = False) -> None:
        """Poll at the next step; `fetch`: fetch then even if the NOOP reports nothing."""
        self._next_poll = 0.0
        self._fetch_due = self._fetch_due or fetch

    @property
    def woken(self) -> bool:
        """`wake()` was called and the current `receive` has not returned yet."""
        return self._woken.is_set()

    def idle_wait(self, client: imapclient.IMAPClient, until: float) -> bool:
        """Wait in the open IDLE until `until`, `wake()` or the server's news; True
        when it announced new mail. A subclass may wait otherwise (the relay's reader
        sleeps in one select())."""
        early_empty = 0
        while not self._woken.is_set():
            started = time.monotonic()
            remaining = until - started
            if remaining <= 0:
                return False
            # Short slices so that wake() is seen within a quarter of a second.
            wait = min(remaining, 0.25)
            responses = client.idle_check(wait)
            if any(r and r[0] == b"BYE" for r in responses):
                raise imaplib.IMAP4.abort(f"server said BYE in IDLE: {responses!r}")
            # EXISTS/RECENT: the examined mailbox; STATUS: another one (NOTIFY, routed mode).
            if any(
                (len(r) > 1 and r[1] in (b"EXISTS", b"RECENT")) or r[:1] == (b"STATUS",)
                for r in responses
            ):
                return True
            # EXPUNGE (Cyrus, a mailbox renamed away) or an untagged NO (Dovecot, the
            # mailbox deleted): the next poll checks the mailbox is still the one examined.
            if self.watches_its_mailbox and any(
                (len(r) > 1 and r[1] == b"EXPUNGE") or r[:1] == (b"NO",) for r in responses
            ):
                self._check_mailbox = True
                return True
            # imapclient's idle_check swallows EOF and returns nothing at once: a closed
            # connection looks like an empty slice that did not wait.
            early = not responses and time.monotonic() - started < wait / 2
            early_empty = early_empty + 1 if early else 0
            if early_empty >= 3:
                raise imaplib.IMAP4.abort("connection closed in IDLE")
        return False

    def _end_idle(self, client: imapclient.IMAPClient) -> None:
        self._idle_until = None
        client.idle_done()
        imap_wire.clear_untagged(client)

    def _start_idle(self, client: imapclient.IMAPClient) -> bool:
        """Send IDLE and read up to the server's continuation; True if it announced new
        mail first."""
        news = imap_wire.start_idle(client)
        self.counters["idles"] += 1
        return news

    def receive(self, timeout: float | None) -> list[Inbound]:
        if self._closed:
            raise TransportError("IMAP receiver is closed")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while not self._woken.is_set():
            now = time.monotonic()
            client = self._client
            if client is None:
                if now >= self._retry_at and self._reconnect():
                    continue
                self._woken.wait(max(0.0, min(self._retry_at, deadline) - now))
            else:
                try:
                    items = self._step(client, now, deadline)
                except _CONNECTION_ERRORS as exc:
                    self._drop(exc)
                    items = []
                if items:
                    return items
            if time.monotonic() >= deadline:
                break
        self._woken.clear()
        return []

    def _step(self, client: imapclient.IMAPClient, now: float, deadline: float) -> list[Inbound]:
        """One poll or one wait (a slice of an IDLE, or the gap until the next poll)."""
        self.before_step(client, now)
        schedule = self.schedule
        if self._idle_until is not None:
            news = self.idle_wait(client, min(self._idle_until, deadline))
            if news or time.monotonic() >= self._idle_until:
                self._end_idle(client)
                self._next_poll = 0.0
                self._fetch_due = True  # the announcement (if any) was read here
                if news:
                    self.counters["idle_wakeups"] += 1
                    schedule.announced(time.monotonic())
            return []
        if now >= self._next_poll:
            items = self.poll()
            self._just_polled = True
            # A backlog chunk: read the next one at once; else the schedule says when.
            self._next_poll = 0.0 if self._backlog else now + schedule.polled(now, len(items))
            self._quiet = self._quiet and not items
            return items
        if schedule.idles(now):
            if not self._just_polled:
                # Dovecot does not announce mail that came before IDLE: poll first.
                self._next_poll = 0.0
                return []
            self._just_polled = False
            if not self._quiet:
                self._quiet = True
                self.tracer.event(
                    IDLE,
                    detail=f"{self.settings.mailbox} is quiet: waiting in IDLE",
                    extra={"mode": schedule.mode, "polls": self.counters["polls"]},
                )
            self._idle_until = now + schedule.idle_limit_s()
            if self._start_idle(client):
                self._end_idle(client)
                self._next_poll = 0.0
                self._fetch_due = True
                schedule.announced(now)
            return []
        until = min(self._next_poll, deadline, schedule.idle_from())
        self._just_polled = False
        self._woken.wait(max(0.0, until - now))
        return []

    def wake(self) -> None:
        self._woken.set()

    def close(self) -> None:
        self._closed = True
        self._woken.set()
        client, self._client = self._client, None
        if client is not None:
            try:
                if self._idle_until is not None:
                    self._end_idle(client)
                client.logout()
            except Exception:
                self._shut(client)
