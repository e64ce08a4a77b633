"""One IMAP receiver per process and inbox: the contexts that read the same inbox share it.

Why (issue 18): a context with its own receiver holds its own IMAP connection and
fetches every body itself, so N contexts in one process cost N connections and N
copies of each message, and the one past the server's per-account limit is refused.

A `SharedImapReceiver` holds one `ImapReceiver` (one connection, each message fetched
once) driven by a thread of its own, and puts each inbound email on the queue of every
attached context. A context holds a `SharedReceiverHandle`: a thin EmailReceiver with
its own queue, `wake` and `close`, so one context's shutdown or slow handlers never
stop or delay the others' mail. Receivers are shared by `ShareKey`: everything that
changes what is read or how (the IMAP settings - URL, user, password, TLS, mailbox -
and every parameter of the receiver); contexts with different keys get different
receivers. Reference counted: the last handle to close logs out.

A context that joins a running receiver gets what that receiver fetches from then on:
new mail, as a receiver of its own would (a context with `start-uid` therefore never
shares: it asked for the past). Trace events of the shared receiver (`mail.*`) go to
the tracer of every context attached when they happen; a joining context gets
`mail.shared_attached` instead of the `mail.connected` of the login it did not make.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from mailbus.errors import TransportError
from mailbus.mail.imap_receiver import ImapReceiver, ImapSettings
from mailbus.mail.kinds import MailKind
from mailbus.trace import TraceEvent, Tracer
from mailbus.transport import EmailReceiver, Inbound

log = logging.getLogger(__name__)

# Back-off of the dispatch thread after an unexpected receive failure (a lost
# connection is not one: the ImapReceiver reconnects by itself).
_MIN_BACKOFF_S = 0.1
_MAX_BACKOFF_S = 5.0
_JOIN_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ShareKey:
    """What decides whether two contexts can share a receiver: the IMAP settings (the
    password included, so that a context with a wrong one is refused by the server
    instead of riding on another's login) and the receiver's keyword arguments."""

    settings: ImapSettings
    parameters: tuple[tuple[str, Hashable], ...]


ReceiverFactory = Callable[[Tracer], ImapReceiver]


class _Closed(Exception):
    """The shared receiver closed before the handle could attach: make a new one."""


class SharedImapReceiver:
    """One ImapReceiver and its dispatch thread, for the handles attached to it."""

    def __init__(self, key: ShareKey, factory: ReceiverFactory) -> None:
        self.key = key
        # The ImapReceiver's events reach every attached context's tracer through this.
        self.tracer = Tracer()
        self.tracer.add_listener(self._forward)
        self.imap = factory(self.tracer)
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()
        # Replaced, never mutated: the dispatch thread reads it without the lock.
        self._handles: tuple[SharedReceiverHandle, ...] = ()
        self._state = "new"  # -> "running" -> "closed"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def attached(self) -> int:
        return len(self._handles)

    def attach(self, handle: SharedReceiverHandle) -> None:
        """Add `handle`; the first one logs in (its errors are raised here, and the
        receiver is closed). Raises _Closed if the last handle just left."""
        with self._lock:
            if self._state == "closed":
                raise _Closed
            # Before connecting: the first context sees mail.connected.
            self._handles = (*self._handles, handle)
            if self._state == "new":
                try:
                    self.imap.connect()
                except BaseException:
                    self._handles = ()
                    self._state = "closed"
                    raise
                self._state = "running"
                self._thread = threading.Thread(
                    target=self._run, name="mailbus-imap-shared", daemon=True
                )
                self._thread.start()
                return
            count = len(self._handles)
        s = self.key.settings
        handle.tracer.event(
            MailKind.SHARED_ATTACHED,
            detail=f"{s.server} {s.mailbox}: reading through the process's shared receiver",
            extra={"contexts": count},
        )

    def detach(self, handle: SharedReceiverHandle) -> bool:
        """Remove `handle`; True if it was the last one and the receiver is now closed."""
        with self._lock:
            if handle not in self._handles:
                return False
            self._handles = tuple(h for h in self._handles if h is not handle)
            if self._handles or self._state == "closed":
                return False
            self._state = "closed"
        self._stop.set()
        self.imap.wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT_S)
        self.imap.close()
        return True

    def _forward(self, event: TraceEvent) -> None:
        for handle in self._handles:
            if handle.tracer.active:
                handle.tracer.emit(event)

    def _run(self) -> None:
        delay = 0.0
        while not self._stop.is_set():
            try:
                items = self.imap.receive(self.imap.idle_wait_s)
            except Exception as exc:
                if self._stop.is_set():
                    break
                # Each context's polling manager reports it (an `error` event) as it
                # would its own receiver's failure.
                delay = min(max(delay * 2, _MIN_BACKOFF_S), _MAX_BACKOFF_S)
                self.counters["receive_errors"] += 1
                log.warning("shared IMAP receiver failed (retrying in %.1f s): %r", delay, exc)
                for handle in self._handles:
                    handle.fail(exc)
                self._stop.wait(delay)
                continue
            delay = 0.0
            if items:
                handles = self._handles
                self.counters["dispatched"] += len(items) * len(handles)
                for handle in handles:
                    handle.put(items)


class _Registry:
    """The process's shared receivers by key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._receivers: dict[ShareKey, SharedImapReceiver] = {}

    def attach(
        self, key: ShareKey, factory: ReceiverFactory, handle: SharedReceiverHandle
    ) -> SharedImapReceiver:
        while True:
            with self._lock:
                shared = self._receivers.get(key)
                if shared is None:
                    shared = self._receivers[key] = SharedImapReceiver(key, factory)
            # Outside the registry's lock: a slow login holds up only its own key.
            try:
                shared.attach(handle)
            except _Closed:
                self.forget(shared)
                continue
            except BaseException:
                self.forget(shared)
                raise
            return shared

    def forget(self, shared: SharedImapReceiver) -> None:
        with self._lock:
            if self._receivers.get(shared.key) is shared:
                del self._receivers[shared.key]

    def receivers(self) -> list[SharedImapReceiver]:
        with self._lock:
            return list(self._receivers.values())

    def after_fork(self) -> None:
        """In a forked child the receivers' threads are gone (and a lock may be held by
        one that no longer exists): a context made there must log in afresh."""
        self._lock = threading.Lock()
        self._receivers = {}


REGISTRY = _Registry()
os.register_at_fork(after_in_child=REGISTRY.after_fork)


class SharedReceiverHandle(EmailReceiver):
    """One context's view of the shared receiver: its own queue, wake and close.

    It declines `set_consumer`, so that each context's handlers run on its own polling
    thread and a slow one delays only its own context; `follow` is ignored (the shared
    inbox holds everything). The queue is not bounded: a context that stops taking mail
    while the others go on keeps what comes in memory until it closes."""

    # wake() and new mail always end a wait: an idle context need not come round often.
    idle_wait_s = 5.0

    def __init__(
        self,
        key: ShareKey,
        factory: ReceiverFactory,
        tracer: Tracer | None = None,
        registry: _Registry = REGISTRY,
    ) -> None:
        self.key = key
        self.tracer = tracer or Tracer()
        self._factory = factory
        self._registry = registry
        self._cond = threading.Condition()
        self._items: deque[Inbound] = deque()
        self._woken = False
        self._closed = False
        self._error: Exception | None = None
        self._shared: SharedImapReceiver | None = None

    def connect(self) -> None:
        """Attach to the process's receiver for this key, logging in if there is none."""
        if self._shared is not None:
            return
        if self._closed:
            raise TransportError("IMAP receiver is closed")
        self._shared = self._registry.attach(self.key, self._factory, self)

    @property
    def shared(self) -> SharedImapReceiver:
        if self._shared is None:
            raise TransportError("not connected")
        return self._shared

    @property
    def imap(self) -> ImapReceiver:
        """The shared connection's receiver (its counters are the process's)."""
        return self.shared.imap

    @property
    def counters(self) -> Counter[str]:
        return self.shared.imap.counters

    # -- called by the dispatch thread ---------------------------------------------------
    def put(self, items: list[Inbound]) -> None:
        with self._cond:
            if self._closed:
                return
            self._items.extend(items)
            self._cond.notify_all()

    def fail(self, exc: Exception) -> None:
        with self._cond:
            self._error = exc
            self._cond.notify_all()

    # -- EmailReceiver -------------------------------------------------------------------
    def receive(self, timeout: float | None) -> list[Inbound]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise TransportError("IMAP receiver is closed")
                if self._woken:
                    self._woken = False
                    return []
                if self._error is not None:
                    exc, self._error = self._error, None
                    raise TransportError(f"shared IMAP receiver failed: {exc!r}")
                if self._items:
                    out = list(self._items)
                    self._items.clear()
                    return out
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._items.clear()
            self._cond.notify_all()
        # The reference stays: the counters can still be read after close.
        if self._shared is not None and self._shared.detach(self):
            self._registry.forget(self._shared)
