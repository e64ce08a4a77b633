"""One IMAP receiver per process and inbox: the contexts that read the same inbox share it.

Why: a context with its own receiver holds its own IMAP connection and
fetches every body itself, so N contexts in one process cost N connections and N
copies of each message, and the one past the server's per-account limit is refused.

A `SharedImapReceiver` holds one `ImapReceiver` (one connection, each message fetched
once) and puts each inbound email on the queue of every attached context. A context
holds a `SharedReceiverHandle`: a thin EmailReceiver with its own queue, `wake` and
`close`, so one context's shutdown or slow handlers never stop or delay the others'
mail. The connection is driven by whichever context is waiting for mail (see
SharedImapReceiver): no thread of its own, and no thread hand-off for the context that
fetched (a first version's dispatch thread looked a few ms slower at one context, which
the benchmark's order turned out to explain as well; a thread fewer stayed a gain).
Receivers are shared by `ShareKey`: everything that changes what is read or how (the
IMAP settings - URL, user, password, TLS, mailbox - and every parameter of the
receiver); contexts with different keys get different receivers. Reference counted:
the last handle to close logs out.

A context that joins a running receiver gets what that receiver fetches from then on:
new mail, as a receiver of its own would (a context with `start-uid` therefore never
shares: it asked for the past). Trace events of the shared receiver (`mail.*`) go to
the tracer of every context attached when they happen; a joining context gets
`mail.shared_attached` instead of the `mail.connected` of the login it did not make.
"""

from __future__ import annotations

import math
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
    """One ImapReceiver for the handles attached to it.

    No thread of its own: whichever attached context is waiting in `receive` drives the
    connection (one at a time, `driver`), takes what it fetched and puts it on the
    other contexts' queues. The one context of a process then reads exactly as with a
    receiver of its own, without a thread hand-off; with several, the role passes to
    another waiting context whenever the driver's wait ends, so a context busy in its
    handlers never holds up the others' mail."""

    def __init__(self, key: ShareKey, factory: ReceiverFactory) -> None:
        self.key = key
        # The ImapReceiver's events reach every attached context's tracer through this.
        self.tracer = Tracer()
        self.tracer.add_listener(self._forward)
        self.imap = factory(self.tracer)
        self.counters: Counter[str] = Counter()
        # Guards the handles, the driver and every handle's queue. Reentrant (the
        # default RLock): a trace listener may call wake() on the emitting thread.
        self.cond = threading.Condition()
        # Replaced, never mutated: trace forwarding reads it without the lock.
        self._handles: tuple[SharedReceiverHandle, ...] = ()
        self._state = "new"  # -> "running" -> "closed"
        self.driver: SharedReceiverHandle | None = None

    @property
    def attached(self) -> int:
        return len(self._handles)

    def attach(self, handle: SharedReceiverHandle) -> None:
        """Add `handle`; the first one logs in (its errors are raised here, and the
        receiver is closed). Raises _Closed if the last handle just left."""
        with self.cond:
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
        with self.cond:
            if handle not in self._handles:
                return False
            self._handles = tuple(h for h in self._handles if h is not handle)
            if self.driver is handle:
                self.imap.wake()  # hand the connection on at once
            if self._handles or self._state == "closed":
                return False
            self._state = "closed"
        self.imap.close()
        return True

    def dispatch(self, items: list[Inbound]) -> None:
        """Put `items` on every attached handle's queue (called with `cond` held)."""
        handles = self._handles
        self.counters["dispatched"] += len(items) * len(handles)
        for handle in handles:
            handle.queue(items)

    def _forward(self, event: TraceEvent) -> None:
        for handle in self._handles:
            if handle.tracer.active:
                handle.tracer.emit(event)


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
        """In a forked child the receivers' connections are the parent's sockets and
        their drivers are threads that do not exist there (one may have held a lock
        when it forked): a context made in the child must log in afresh."""
        self._lock = threading.Lock()
        self._receivers = {}


REGISTRY = _Registry()
os.register_at_fork(after_in_child=REGISTRY.after_fork)


class SharedReceiverHandle(EmailReceiver):
    """One context's view of the shared receiver: its own queue, wake and close.

    It declines `set_consumer`, so that each context's handlers run on its own polling
    thread and a slow one delays only its own context; `follow` is ignored (the shared
    inbox holds everything). A failure of the connection other than a lost one (those
    are reopened inside) is raised from the `receive` of the context driving it; the
    next context to drive meets it too, so each reports it as its own. The queue is not
    bounded: a context that stops taking mail while the others go on keeps what comes
    in memory until it closes."""

    # As ImapReceiver's: the driver's wait is an IMAP wait (wake() ends it within a
    # quarter of a second); an IDLE outlives it.
    idle_wait_s = 1.0

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
        # Guarded by the shared receiver's lock.
        self._items: deque[Inbound] = deque()
        self._woken = False
        self._closed = False
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

    # -- called with the shared receiver's lock held -------------------------------------
    def queue(self, items: list[Inbound]) -> None:
        if not self._closed:
            self._items.extend(items)

    # -- EmailReceiver -------------------------------------------------------------------
    def receive(self, timeout: float | None) -> list[Inbound]:
        shared = self._shared
        if shared is None:
            raise TransportError("IMAP receiver is not connected")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        cond = shared.cond
        while True:
            with cond:
                if self._closed:
                    raise TransportError("IMAP receiver is closed")
                if self._woken:
                    self._woken = False
                    return []
                if self._items:
                    out = list(self._items)
                    self._items.clear()
                    return out
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                if shared.driver is not None:
                    # Another context reads; it hands over what it gets, or the role.
                    cond.wait(None if remaining == math.inf else remaining)
                    continue
                shared.driver = self
            got: list[Inbound] = []
            try:
                got = shared.imap.receive(None if remaining == math.inf else remaining)
            finally:
                with cond:
                    shared.driver = None
                    if got:
                        shared.dispatch(got)
                    cond.notify_all()

    def wake(self) -> None:
        shared = self._shared
        if shared is None:
            self._woken = True
            return
        with shared.cond:
            self._woken = True
            if shared.driver is self:
                shared.imap.wake()
            shared.cond.notify_all()

    def close(self) -> None:
        shared = self._shared
        if shared is None:
            self._closed = True
            return
        with shared.cond:
            if self._closed:
                return
            self._closed = True
            self._items.clear()
            shared.cond.notify_all()
        # The reference stays: the counters can still be read after close.
        if shared.detach(self):
            self._registry.forget(shared)
