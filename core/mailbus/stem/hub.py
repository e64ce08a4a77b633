"""Hubs: a named home for cells, which delivers messages between them and, through
portals, to and from other hubs.

`dispatch` checks a message and queues it; the hub's loop takes messages from the queue
in order and delivers each one after the callback that dispatched it has returned. The
loop runs in the hub's own thread (`start`, or `with hub:`), or in the caller's thread
through `process_queue` and `run_until` (tests, command-line tools).

Delivery has the design's three phases:
1. Which hub. A `to_hub` naming another hub goes to the portal registered for that hub
   (or for the hub a route names); with no such portal the message is undeliverable and
   reported. No hub, or this hub's name: a cell of this hub.
2. Which cell: (cell, target), then cell alone. Not found: with a hub name, an
   addressing error; without one, a message that came in through a portal is an
   addressing error too (never forwarded again: no routing loops); any other goes to
   the DEFAULT portal (an addressing error when there is none).
3. Which method: `<cmd>_cmd` for a cmd message, `<type>_in` for any other, else
   `msg_in`; a cell with neither is reported (stem.no_method).

A cmd method that returns a value (not None) answers with a `reply_type` message (by
default `response`) to `reply_to` or else `from`, with the value as data and `reply_id`
set to the command's `msg_id`. A method that raises answers a cmd with an `error`
message. After delivery, `ack_req` sends a `msg_ack` the same way.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, wait
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mailbus.errors import MailbusError
from mailbus.guard_condition import GuardCondition
from mailbus.stem import errors as E
from mailbus.stem.address import Address, check_part
from mailbus.stem.calls import CallReplies
from mailbus.stem.errors import CallTimeoutError, PortalFormatError
from mailbus.stem.message import AddressLike, StemMessage
from mailbus.stem.portal import MAX_HOPS, Portal, decode, inbox_topic
from mailbus.stem.registry import DEFAULT, CellRegistry, PortalRegistry
from mailbus.subscription import OverflowPolicy
from mailbus.trace import TraceEvent, Tracer
from mailbus.waitset import WaitSet

if TYPE_CHECKING:
    from mailbus.context import Context
    from mailbus.subscription import Subscription

log = logging.getLogger(__name__)

# Only public method names are looked up from a message's cmd or type.
_METHOD = re.compile(r"[A-Za-z][A-Za-z0-9_]*_(?:cmd|in)")
INBOX_DEPTH = 100_000
CALLS_CELL = "_calls"  # the cell name replies to `Hub.call` come back to
_CALLS_ADDRESS = Address(CALLS_CELL)


@functools.lru_cache(maxsize=1024)
def _method_name(name: str) -> bool:
    return _METHOD.fullmatch(name) is not None


class Cell:
    """A convenient base for cells (any object with delivery methods can be a cell):
    `register_cell` sets `hub`, `name`, `target` and `address`, and `send` fills in
    `from`."""

    hub: Hub | None = None
    name: str = ""
    target: str = ""
    address: Address = Address("")

    def send(self, to: AddressLike, **attributes: Any) -> StemMessage:
        if self.hub is None:
            raise RuntimeError(f"cell {self!r} is not registered with a hub")
        attributes.setdefault("from_", self.address)
        return self.hub.dispatch(StemMessage(to=to, **attributes))


class _Inbox:
    """The hub's subscription to its inbox topic on one context."""

    def __init__(self, hub: Hub, context: Context, listening: bool) -> None:
        self.context = context
        self.listening = listening
        self.subscription: Subscription = context.subscription(
            inbox_topic(hub.name), depth=INBOX_DEPTH, overflow=OverflowPolicy.DROP_NEWEST
        )


class Hub:
    def __init__(self, name: str, *, tracer: Tracer | None = None, max_hops: int = MAX_HOPS):
        if not check_part(name, "hub") or name == DEFAULT:
            raise ValueError(f"a hub needs a name (other than {DEFAULT})")
        self.name = name
        self.tracer = tracer if tracer is not None else Tracer()
        # Without a tracer given, the hub's errors also go to the tracer of the first
        # context it joins, so that they reach its listeners (the workbench's log).
        self._adopt_tracer = tracer is None
        self._errors_to: Tracer | None = None
        self.max_hops = max_hops
        self.cells = CellRegistry()
        self.portals = PortalRegistry()
        self.counters: Counter[str] = Counter()
        self._queue: deque[tuple[StemMessage, int]] = deque()
        self._inboxes: tuple[_Inbox, ...] = ()
        self._guard = GuardCondition(f"stem hub {name}")
        self._wait_set = WaitSet(None, f"stem hub {name}")
        self._wait_set.add_guard_condition(self._guard)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._draining = 0  # ident of the thread running the loop now (0: none)
        self._stopping = threading.Event()
        self._calls: CallReplies | None = None

    def __repr__(self) -> str:
        return f"Hub({self.name!r}, cells={len(self.cells)}, queued={len(self._queue)})"

    # -- cells ----------------------------------------------------------------------------
    def register_cell(self, cell: object, name: str, target: str = "") -> object:
        self.cells.register(cell, name, target)
        if isinstance(cell, Cell):
            cell.hub, cell.name, cell.target = self, name, target
            cell.address = Address(name, target=target)
        return cell

    def unregister_cell(self, name: str, target: str = "") -> object | None:
        return self.cells.unregister(name, target)

    # -- portals --------------------------------------------------------------------------
    def connect(self, context: Context, remote: str) -> Portal:
        """A client portal to hub `remote` over `context`; the first becomes DEFAULT.
        The remote hub must `listen` on a context that reaches this one."""
        portal = Portal(self, context, remote, kind="client")
        self.portals.register(remote, portal)
        self.portals.register_default(portal)
        self._inbox(context, listening=False)
        return portal

    def listen(self, context: Context) -> None:
        """Take messages from any hub that writes to this one over `context`, giving
        each sender an accepted portal (which never becomes DEFAULT)."""
        self._inbox(context, listening=True)

    def add_route(self, hub: str, via: str) -> None:
        """Send messages for `hub` through the portal of hub `via` (chains of hubs)."""
        self.portals.add_route(hub, via)

    def _inbox(self, context: Context, listening: bool) -> _Inbox:
        with self._lock:
            for inbox in self._inboxes:
                if inbox.context is context:
                    inbox.listening = inbox.listening or listening
                    return inbox
            inbox = _Inbox(self, context, listening)
            self._inboxes = (*self._inboxes, inbox)
            if self._adopt_tracer and self._errors_to is None:
                self._errors_to = context.tracer
        self._wait_set.add_subscription(inbox.subscription)
        self._guard.trigger()  # a waiting loop picks the new inbox up
        return inbox

    # -- dispatch -------------------------------------------------------------------------
    def dispatch(self, message: StemMessage) -> StemMessage:
        """Check `message` (MessageError says what is missing) and queue it for delivery
        once the current callback has returned. Return it."""
        message.validate()
        self._queue.append((message, 0))
        if threading.get_ident() != self._draining:  # the loop itself needs no wake-up
            self._guard.trigger()
        return message

    def send(self, **attributes: Any) -> StemMessage:
        """`dispatch(StemMessage(**attributes))`."""
        return self.dispatch(StemMessage(**attributes))

    def call(
        self, to: AddressLike, cmd: str, data: Any = None, *, timeout: float, **attributes: Any
    ) -> StemMessage:
        """Send command `cmd` to `to` and return the reply (a `response`, or an `error`
        when the method raised). Raise CallTimeoutError after `timeout` seconds."""
        if threading.get_ident() == self._draining or (
            self._thread is not None and threading.current_thread() is self._thread
        ):
            raise RuntimeError("call() from a cell would block its own hub; send instead")
        calls = self._calls
        if calls is None:
            with self._lock:
                if self._calls is None:
                    self._calls = CallReplies(self.counters)
                    self.cells.register(self._calls, CALLS_CELL)
                calls = self._calls
        message = StemMessage(to=to, from_=_CALLS_ADDRESS, cmd=cmd, data=data, **attributes)
        slot: Future[StemMessage] = Future()
        calls.pending[message.msg_id] = slot
        try:
            self.dispatch(message)
            if self.running:
                done = bool(wait([slot], timeout).done)
            else:
                done = self.run_until(slot.done, timeout)
            if not done:
                raise CallTimeoutError(f"no reply from {to} to command {cmd!r} within {timeout} s")
            return slot.result()
        finally:
            calls.pending.pop(message.msg_id, None)

    # -- the loop -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def process_queue(self) -> int:
        """Deliver everything queued or arrived, until nothing is left; return how many
        messages were handled. Only while the hub's own thread is not running."""
        if self._thread is not None and threading.current_thread() is not self._thread:
            raise RuntimeError(f"hub {self.name!r} runs its own loop; do not drain it too")
        me = threading.get_ident()
        with self._lock:
            if self._draining == me:
                raise RuntimeError(
                    f"a cell of hub {self.name!r} cannot run its loop: delivery waits "
                    "until the current callback returns"
                )
            if self._draining:
                raise RuntimeError(
                    f"hub {self.name!r} is run by another thread; use start() to share a hub"
                )
            self._draining = me
        handled = 0
        queue = self._queue
        try:
            while True:
                self._take_inbound()
                if not queue:
                    return handled
                # A chain of messages between local cells must not starve the inboxes.
                for _ in range(len(queue)):
                    message, hops = queue.popleft()
                    try:
                        self._deliver(message, hops)
                    except Exception:  # a bug here must not stop the hub
                        log.exception("hub %s failed to deliver %s", self.name, message.dump())
                    handled += 1
                if self._stopping.is_set():  # stop() must not wait for endless traffic
                    return handled
        finally:
            self._draining = 0

    def run_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Run the loop in this thread until `predicate()` holds (True) or `timeout`
        seconds pass (False)."""
        deadline = time.monotonic() + timeout
        while True:
            self.process_queue()
            if predicate():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._wait_set.wait(remaining)

    def start(self) -> Self:
        """Run the loop in the hub's own thread."""
        if self._thread is not None:
            raise RuntimeError(f"hub {self.name!r} is already started")
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name=f"stem-hub-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        self._guard.trigger()
        if thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():  # a cell method blocks: keep the thread on record
                log.warning("hub %s: loop did not stop within %s s", self.name, timeout)
                return
        self._thread = None

    def close(self) -> None:
        """Stop the loop and leave the contexts (their owners shut them down)."""
        self.stop()
        with self._lock:
            inboxes, self._inboxes = self._inboxes, ()
        for inbox in inboxes:
            inbox.subscription.close()
        self._wait_set.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.process_queue()
            except Exception:
                log.exception("hub %s loop", self.name)
            if not self._queue and not self._stopping.is_set():
                self._wait_set.wait(1.0)

    # -- inbound --------------------------------------------------------------------------
    def _take_inbound(self) -> None:
        for inbox in self._inboxes:
            subscription = inbox.subscription
            while (email_message := subscription.take()) is not None:
                headers, body = email_message.email.headers, email_message.body
                try:
                    self._accept(inbox, headers, body)
                except Exception as exc:  # a bug here must not stop the hub
                    log.exception("hub %s failed to take an email", self.name)
                    self._report_raw(headers, body, f"failed to take: {exc!r}")

    def _accept(self, inbox: _Inbox, headers: Mapping[str, str], body: str) -> None:
        try:
            message, sender, hops = decode(headers, body)
        except PortalFormatError as exc:
            self._report_raw(headers, body, f"unreadable portal email: {exc}")
            return
        message.in_portal = sender
        portal = self.portals.names.get(sender)
        why = ""
        if portal is None and inbox.listening:
            try:
                portal = Portal(self, inbox.context, sender, kind="accepted")
                self.portals.register(sender, portal)
            except ValueError as exc:  # it claims this hub's name, or DEFAULT
                portal, why = None, str(exc)
        if portal is None or portal.context is not inbox.context:
            if not why:
                why = "no portal here" if portal is None else "its portal is on another context"
            self._report(E.UNDELIVERABLE, message, f"refused a message from hub {sender!r}: {why}")
            return
        portal.received += 1
        if self.tracer.active:
            self._trace(E.RECEIVED, message, f"from hub {sender!r}, hop {hops}")
        self._queue.append((message, hops))

    # -- delivery -------------------------------------------------------------------------
    def _deliver(self, message: StemMessage, hops: int) -> None:
        to = message.to
        assert to is not None  # dispatch and decode validated the message
        # Phase 1: which hub.
        if to.hub and to.hub != self.name:
            portal = self.portals.get(to.hub)
            if portal is None:
                self._report(
                    E.UNDELIVERABLE, message, f"unknown hub {to.hub!r}: no portal and no route"
                )
            else:
                self._forward(portal, message, hops)
            return
        # Phase 2: which cell.
        cell = self.cells.lookup(to.cell, to.target)
        if cell is None:
            if to.hub:
                self._report(
                    E.ADDRESSING_ERROR, message, f"no cell {to.cell!r} in hub {self.name!r}"
                )
            elif message.in_portal is not None:
                self._report(
                    E.ADDRESSING_ERROR,
                    message,
                    f"no cell {to.cell!r} in hub {self.name!r} for a message that came in "
                    f"through the portal from hub {message.in_portal!r}: not forwarded again",
                )
            elif (default := self.portals.default) is not None:
                self._forward(default, message, hops)
            else:
                self._report(
                    E.ADDRESSING_ERROR,
                    message,
                    f"no cell {to.cell!r} in hub {self.name!r} and no DEFAULT portal",
                )
            return
        # Phase 3: which method.
        self._call_cell(cell, message)

    def _forward(self, portal: Portal, message: StemMessage, hops: int) -> None:
        if hops >= self.max_hops:
            self._report(E.UNDELIVERABLE, message, f"crossed {hops} portals: routing loop?")
            return
        try:
            portal.send(message, hops + 1)
        except (PortalFormatError, MailbusError, OSError) as exc:
            self._report(E.UNDELIVERABLE, message, f"portal to hub {portal.remote!r}: {exc}")
            return
        self.counters["forwarded"] += 1
        if self.tracer.active:
            self._trace(E.FORWARDED, message, f"to hub {portal.remote!r}")

    def _call_cell(self, cell: object, message: StemMessage) -> None:
        is_cmd = message.type == "cmd"
        name = f"{message.cmd}_cmd" if is_cmd else f"{message.type}_in"
        method = getattr(cell, name, None) if _method_name(name) else None
        if not callable(method):
            method = getattr(cell, "msg_in", None)
            if not callable(method):
                self._report(
                    E.NO_METHOD, message, f"cell {message.to} has neither {name}() nor msg_in()"
                )
                return
        try:
            result = method(message)
        except Exception as exc:
            self._report(E.CELL_ERROR, message, f"{method.__name__} raised {exc!r}")
            if is_cmd:
                self._queue.append(
                    (message.reply(type="error", data=f"{type(exc).__name__}: {exc}"), 0)
                )
            return
        self.counters["delivered"] += 1
        if self.tracer.active:
            self._trace(E.DELIVERED, message, f"{method.__name__}()")
        if is_cmd and result is not None:
            self._queue.append((message.reply(data=result), 0))
        if message.ack_req:
            self._queue.append((message.reply(type="msg_ack"), 0))

    # -- reports --------------------------------------------------------------------------
    def _trace(self, kind: str, message: StemMessage, detail: str) -> None:
        self.tracer.emit(self._event(kind, message, detail))

    def _event(self, kind: str, message: StemMessage, detail: str) -> TraceEvent:
        dump = message.dump()
        return TraceEvent(
            kind,
            time.time_ns(),
            name=str(message.to),
            detail=detail,
            body=dump,
            # JSON-safe (data JSON cannot hold shows as its repr): recorders store it.
            extra={"hub": self.name, "message": json.loads(dump)},
        )

    def _errors_traced(self) -> bool:
        relay = self._errors_to
        return self.tracer.active or (relay is not None and relay.active)

    def _emit_error(self, event: TraceEvent) -> None:
        """An error goes to the hub's tracer and to its context's (see __init__)."""
        self.tracer.emit(event)
        if self._errors_to is not None:
            self._errors_to.emit(event)

    def _report(self, kind: str, message: StemMessage, detail: str) -> None:
        """An error: counted, traced with the message's dump, logged."""
        self.counters[kind] += 1
        log.warning("hub %s: %s: %s: %s", self.name, kind, detail, message.dump())
        if self._errors_traced():
            self._emit_error(self._event(kind, message, detail))

    def _report_raw(self, headers: Mapping[str, str], body: str, detail: str) -> None:
        self.counters[E.UNDELIVERABLE] += 1
        log.warning("hub %s: %s", self.name, detail)
        if self._errors_traced():
            event = TraceEvent(
                E.UNDELIVERABLE,
                time.time_ns(),
                detail=detail,
                body=body[:4096],
                headers=dict(headers),
                extra={"hub": self.name},
            )
            self._emit_error(event)
