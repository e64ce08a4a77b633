"""The broker: modules, links between them, and serial delivery on one worker per module.

Every call is safe from any thread. How it stays fast without a lock per message:

- Each module has a `deque` of pending `(source name, message)` items and one worker
  thread. Publishing appends to the sink's deque (atomic) and wakes the worker only if
  it announced that it is going to sleep; the worker takes everything queued in one
  batch. The wake-up is a raw lock used as a binary semaphore (no Condition, no Event).
- A source's routes (its sinks and their back-pressure) are an immutable tuple rebuilt
  on every link change and read under the source's own publish lock, which also makes
  every sink see one source's messages in the same order and lets removal wait out any
  publish that still holds the old routes (see `remove_module`).
- Queues are bounded. A full queue applies the link's or sink's Backpressure: block the
  publisher (default; bounded by a timeout, after which PublishTimeoutError names the
  sink) or drop with a counter and a `broker.dropped` trace event. Never in silence.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, wait
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mailbus.broker.errors import (
    BrokerClosedError,
    BrokerError,
    DuplicateModuleError,
    LinkError,
    ModuleStartError,
    PublishTimeoutError,
    UnknownModuleError,
)
from mailbus.broker.kinds import BrokerKind
from mailbus.broker.message import Message
from mailbus.broker.module import check_module
from mailbus.broker.policy import DEFAULT_BACKPRESSURE, DEFAULT_CAPACITY, Backpressure, Overflow
from mailbus.broker.snapshot import BrokerSnapshot, LinkInfo, ModuleState, ModuleStats
from mailbus.names import check_name
from mailbus.trace import Tracer

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)

WILDCARD = "*"
DEFAULT_STOP_TIMEOUT = 10.0
MAX_FINAL_STATS = 1024

# Trace event kinds of the broker (TraceEvent.name is the module the event concerns).
PUBLISHED = BrokerKind.PUBLISHED
DELIVERED = BrokerKind.DELIVERED
DROPPED = BrokerKind.DROPPED
REFUSED = BrokerKind.REFUSED
MODULE_FAILED = BrokerKind.MODULE_FAILED
MODULE_ADDED = BrokerKind.MODULE_ADDED
MODULE_STARTED = BrokerKind.MODULE_STARTED
MODULE_REMOVED = BrokerKind.MODULE_REMOVED
LINK_ADDED = BrokerKind.LINK_ADDED
LINK_REMOVED = BrokerKind.LINK_REMOVED
DESTROYED = BrokerKind.DESTROYED

_Item = tuple[str, Message]
FAILED = ModuleState.FAILED


class _Record:
    """A module attached to the broker, with its queue, worker and counters."""

    __slots__ = (
        "abort",
        "backpressure",
        "capacity",
        "control",
        "delivered",
        "done",
        "dropped",
        "failed",
        "ident",
        "kind",
        "low_water",
        "module",
        "name",
        "overfill",
        "publish_lock",
        "published",
        "queue",
        "refused",
        "routes",
        "sleeping",
        "space",
        "started",
        "state",
        "stats_lock",
        "stop",
        "thread",
        "waiting",
        "wake",
    )

    def __init__(self, name: str, module: Any, capacity: int, backpressure: Backpressure) -> None:
        self.name = name
        self.module = module
        self.kind = type(module).__name__
        self.capacity = capacity
        self.low_water = capacity // 2  # blocked publishers resume below this: batch hand-offs
        self.backpressure = backpressure
        self.queue: deque[_Item] = deque()
        self.control: deque[Future[None]] = deque()  # start() calls for the worker
        self.sleeping = False
        self.wake = threading.Lock()
        self.wake.acquire()  # locked = nothing to wake for; a publisher releases it
        self.space = threading.Condition(threading.Lock())
        self.waiting = 0
        self.overfill = 0  # > 0: blocked publishers may append beyond capacity (see _remove)
        self.publish_lock = threading.RLock()
        self.routes: tuple[tuple[_Record, Backpressure], ...] = ()
        self.published = 0
        self.delivered = 0
        self.failed = 0
        self.dropped = 0
        self.refused = 0
        self.stats_lock = threading.Lock()
        # "stopping" once removal began, "stopped" when the worker ended; "failed" when the
        # worker died (a receive or start raised a BaseException such as SystemExit) while
        # the module is still attached: what is published to it then is dropped, counted.
        self.state = ModuleState.RUNNING
        self.stop = False  # set once no publisher can reach the queue any more
        self.abort = False  # stop without delivering what is queued
        self.started = False
        self.ident = 0
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def poke(self) -> None:
        """Wake the worker if it announced it is about to sleep."""
        if self.sleeping:
            self.sleeping = False
            with contextlib.suppress(RuntimeError):  # another publisher woke it first
                self.wake.release()


class Broker:
    """`Broker.create(tracer=None, context=None)`; the creator holds one reference.

    `context` is the Mailbus context the bridge modules publish and subscribe through
    (optional for brokers without bridges)."""

    def __init__(
        self,
        *,
        tracer: Tracer | None = None,
        context: Context | None = None,
        trace_messages: bool = True,
    ) -> None:
        self.tracer = tracer
        # broker.published / broker.delivered cost a TraceEvent per message while someone
        # listens; trace_messages=False keeps only life-cycle, drop and failure events.
        self._message_tracer = tracer if trace_messages else None
        self.context = context
        self._lock = threading.RLock()  # the control plane: modules, links, refcount
        self._refs = 1
        self._closed = False
        self._by_name: dict[str, _Record] = {}
        self._by_id: dict[int, _Record] = {}
        # (source or "*", sink) -> the link's own back-pressure, or None for the sink's
        self._links: dict[tuple[str, str], Backpressure | None] = {}
        self._failure_logs = 0
        self._by_ident: dict[int, _Record] = {}  # worker thread ident -> its module
        self._final: dict[str, ModuleStats] = {}  # removed modules' last counters
        if context is not None:  # its modules show in the context's announcements
            self.announced_as = context.add_broker(self)

    @classmethod
    def create(
        cls,
        *,
        tracer: Tracer | None = None,
        context: Context | None = None,
        trace_messages: bool = True,
    ) -> Broker:
        return cls(tracer=tracer, context=context, trace_messages=trace_messages)

    def __repr__(self) -> str:
        state = "destroyed" if self._closed else f"refs={self._refs}"
        return f"Broker(modules={sorted(self._by_name)}, links={len(self._links)}, {state})"

    # -- reference counting -------------------------------------------------------------
    def inc_ref(self) -> None:
        with self._lock:
            if self._closed:
                raise BrokerClosedError("the broker was destroyed")
            self._refs += 1

    def dec_ref(self) -> None:
        """Drop one reference; the last one destroys the broker."""
        with self._lock:
            if self._closed:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            self._closed = True
            names = list(self._by_name)
        if names:
            # The design's rule: destroying a broker with modules attached is a mistake of
            # the owner; say so, then stop them cleanly rather than leak their threads.
            log.warning("broker destroyed with modules still attached: %s", ", ".join(names))
        self._trace(DESTROYED, "", detail=", ".join(names), extra={"modules_attached": names})
        for name in names:
            try:
                self._remove(name, drain=True, timeout=DEFAULT_STOP_TIMEOUT)
            except BrokerError as exc:
                log.error("while destroying the broker: %s", exc)

    @property
    def refcount(self) -> int:
        return self._refs

    @property
    def destroyed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.dec_ref()

    # -- modules ------------------------------------------------------------------------
    def add_module(
        self,
        name: str,
        module: object,
        *,
        capacity: int = DEFAULT_CAPACITY,
        backpressure: Backpressure = DEFAULT_BACKPRESSURE,
    ) -> str:
        """Attach `module` under `name` and start its worker; return the name."""
        check_name(name, "module")
        if name == WILDCARD:
            raise DuplicateModuleError(f"{WILDCARD!r} is reserved for wildcard links")
        check_module(module, f"module {name!r}")
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(
                f"module {name!r}: queue capacity must be an int >= 1, not {capacity!r}"
            )
        if not isinstance(backpressure, Backpressure):
            raise TypeError(f"module {name!r}: backpressure must be a Backpressure")
        with self._lock:
            self._check_open()
            if name in self._by_name:
                raise DuplicateModuleError(f"a module named {name!r} is already attached")
            if id(module) in self._by_id:
                other = self._by_id[id(module)].name
                raise DuplicateModuleError(f"this module object is already attached as {other!r}")
            record = _Record(name, module, capacity, backpressure)
            thread = threading.Thread(
                target=self._work, args=(record,), name=f"broker-{name}", daemon=True
            )
            record.thread = thread
            self._by_name[name] = record
            self._by_id[id(module)] = record
            self._rebuild_routes()
            thread.start()
        self._trace(MODULE_ADDED, name, extra={"kind": record.kind, "capacity": capacity})
        return name

    def start_module(self, module: object, timeout: float | None = DEFAULT_STOP_TIMEOUT) -> None:
        """Run the module's optional start() on its worker (so never beside a receive)
        and wait for it; ModuleStartError if it raised."""
        record = self._record(module)
        if record.state == FAILED:
            raise ModuleStartError(f"module {record.name!r} failed (its worker ended)")
        if getattr(record.module, "start", None) is None:
            record.started = True
            return
        call: Future[None] = Future()
        if record.ident == threading.get_ident():
            self._run_start(record, call)
        else:
            record.control.append(call)
            record.poke()
            if not wait([call], timeout).done:
                raise BrokerError(
                    f"module {record.name!r}: start() did not return within {timeout} s"
                )
        error = call.exception()
        if error is not None:
            raise ModuleStartError(f"module {record.name!r}: start() raised {error!r}") from error

    def remove_module(
        self, module: object, *, drain: bool = True, timeout: float | None = DEFAULT_STOP_TIMEOUT
    ) -> None:
        """Detach a module: unlink it, stop its worker, call its destroy() (on the worker).

        With `drain` the messages already queued for it are delivered first; without,
        they are dropped (counted, traced). Waits up to `timeout` for the worker to end;
        BrokerError if it did not (its receive is still running: it will be destroyed
        when that returns). Called from the module's own receive, it does not wait."""
        name = self._record(module).name
        self._remove(name, drain=drain, timeout=timeout)

    def _remove(self, name: str, *, drain: bool, timeout: float | None) -> None:
        with self._lock:
            record = self._by_name.get(name)
            if record is None:
                raise UnknownModuleError(f"no module named {name!r} is attached")
            failed = record.state == FAILED
            if not failed:
                record.state = ModuleState.STOPPING
            del self._by_name[name]
            del self._by_id[id(record.module)]
            gone = [key for key in self._links if name in key]
            for key in gone:
                del self._links[key]
            record.routes = ()
            self._rebuild_routes()
            sources = [*self._by_name.values(), record]
        # Publishers blocked for room in this queue give up waiting and append (the
        # worker drains or counts what they add).
        with record.space:
            record.space.notify_all()
        # Barrier: a publish reads a source's routes and appends under that source's
        # lock, so once every lock has been held once no publish can still reach this
        # queue. Only then may the worker treat an empty queue as the end.
        # If this thread is a module's worker (a removal from inside receive), a publisher
        # blocked on that module's full queue holds its source's lock and would wait for
        # this very thread: let such publishers overfill the queue so the barrier passes.
        caller = self._by_ident.get(threading.get_ident())
        if caller is not None:
            caller.overfill += 1
            with caller.space:
                caller.space.notify_all()
        try:
            for source in sources:
                with source.publish_lock:
                    pass
        finally:
            if caller is not None:
                caller.overfill -= 1
        record.abort = not drain
        record.stop = True
        record.poke()
        for source_name, sink_name in gone:
            self._trace(LINK_REMOVED, sink_name, extra={"source": source_name, "sink": sink_name})
        if failed:  # its worker ended (or is ending: destroy); only the record is left
            if not record.done.wait(timeout):
                raise BrokerError(
                    f"module {name!r} failed and its destroy() did not return within {timeout} s"
                )
            # Nothing is queued: _worker_died's barrier, then _finish's drain.
            self._record_removed(record)
            return
        if record.ident == threading.get_ident():
            return  # removed from its own receive: the worker ends after it returns
        if not record.done.wait(timeout):
            raise BrokerError(
                f"module {name!r} did not stop within {timeout} s (its receive or start is "
                "still running); it will be destroyed when that returns"
            )

    # -- links ------------------------------------------------------------------------
    def add_link(
        self, source: object, sink: object, *, backpressure: Backpressure | None = None
    ) -> None:
        """Deliver what `source` publishes to `sink`. Source "*" means every other
        module, including ones added later. `backpressure` overrides the sink's."""
        if backpressure is not None and not isinstance(backpressure, Backpressure):
            raise TypeError("backpressure must be a Backpressure or None")
        with self._lock:
            self._check_open()
            source_name = self._link_source(source)
            sink_name = self._link_sink(sink)
            if source_name == sink_name:
                raise LinkError(f"module {sink_name!r} cannot be linked to itself")
            key = (source_name, sink_name)
            if key in self._links:
                raise LinkError(f"duplicate link {source_name!r} -> {sink_name!r}")
            if source_name != WILDCARD and (WILDCARD, sink_name) in self._links:
                raise LinkError(
                    f"duplicate link {source_name!r} -> {sink_name!r}: {sink_name!r} already "
                    f"receives from every module through '*'"
                )
            if source_name == WILDCARD:
                explicit = sorted(s for s, k in self._links if k == sink_name)
                if explicit:
                    raise LinkError(
                        f"duplicate link '*' -> {sink_name!r}: it already receives from "
                        f"{', '.join(explicit)}; remove those links first"
                    )
            self._links[key] = backpressure
            self._rebuild_routes()
        self._trace(
            LINK_ADDED,
            sink_name,
            extra={
                "source": source_name,
                "sink": sink_name,
                "backpressure": backpressure.describe() if backpressure else "",
            },
        )

    def remove_link(self, source: object, sink: object) -> None:
        with self._lock:
            self._check_open()
            source_name = self._link_source(source)
            sink_name = self._link_sink(sink)
            if (source_name, sink_name) not in self._links:
                raise LinkError(f"no link {source_name!r} -> {sink_name!r}")
            del self._links[(source_name, sink_name)]
            self._rebuild_routes()
        self._trace(LINK_REMOVED, sink_name, extra={"source": source_name, "sink": sink_name})

    def _link_source(self, ref: object) -> str:
        if ref == WILDCARD:
            return WILDCARD
        return self._record(ref).name

    def _link_sink(self, ref: object) -> str:
        if ref == WILDCARD:
            raise LinkError("'*' can only be a link's source")
        return self._record(ref).name

    def _rebuild_routes(self) -> None:
        """Recompute every source's route tuple (called with the control lock held)."""
        for record in self._by_name.values():
            routes = []
            for (source, sink), backpressure in self._links.items():
                if source == record.name or (source == WILDCARD and sink != record.name):
                    target = self._by_name[sink]
                    routes.append((target, backpressure or target.backpressure))
            record.routes = tuple(routes)

    # -- publishing -------------------------------------------------------------------
    def publish(self, source: object, message: Message) -> int:
        """Queue `message` for every sink linked to `source` (a module or its name);
        return how many sinks it was queued for (or dropped by their policy)."""
        if self._closed:
            raise BrokerClosedError("the broker was destroyed")
        record = self._record(source)
        if not isinstance(message, Message):
            raise TypeError(f"publish takes a broker Message, not {type(message).__name__}")
        item = (record.name, message)
        refused: list[str] | None = None
        timeout = 0.0
        with record.publish_lock:
            if record.state == FAILED:
                raise BrokerError(f"module {record.name!r} failed (its worker ended); remove it")
            if record.state is not ModuleState.RUNNING:
                raise UnknownModuleError(f"module {record.name!r} has been removed")
            record.published += 1
            routes = record.routes
            for sink, backpressure in routes:
                queue = sink.queue
                if len(queue) < sink.capacity and sink.state != FAILED:
                    queue.append(item)
                    if sink.sleeping:
                        sink.poke()
                elif not self._overflow(sink, backpressure, item):
                    refused = [] if refused is None else refused
                    refused.append(sink.name)
                    timeout = backpressure.timeout or 0.0
        tracer = self._message_tracer
        if tracer is not None and tracer.active:
            tracer.event(
                PUBLISHED,
                name=record.name,
                size=len(message.content),
                extra={"sinks": [sink.name for sink, _ in routes]},
            )
        if refused:
            raise PublishTimeoutError(record.name, tuple(refused), timeout)
        return len(routes)

    def _overflow(self, sink: _Record, backpressure: Backpressure, item: _Item) -> bool:
        """The sink's queue is full, or its worker died: apply `backpressure`. False if it
        refused the item."""
        queue = sink.queue
        if sink.state == FAILED:  # nobody will ever take it: never queue, count it
            self._dropped(sink, item, "module failed (its worker ended), dropped the message")
            return True
        overflow = backpressure.overflow
        if overflow is Overflow.DROP_NEWEST:
            self._dropped(sink, item, "queue full, dropped the newest message")
            return True
        if overflow is Overflow.DROP_OLDEST:
            queue.append(item)
            sink.poke()
            while len(queue) > sink.capacity:
                try:
                    oldest = queue.popleft()
                except IndexError:  # the worker emptied it meanwhile
                    break
                self._dropped(sink, oldest, "queue full, dropped the oldest message")
            return True
        # BLOCK. A module publishing to itself through a cycle cannot wait for its own
        # worker, and a sink being removed takes what is still in flight.
        if sink.ident != threading.get_ident() and sink.state is ModuleState.RUNNING:
            deadline = (
                None if backpressure.timeout is None else time.monotonic() + backpressure.timeout
            )
            timed_out = False
            with sink.space:
                sink.waiting += 1
                try:
                    while (
                        len(queue) >= sink.capacity
                        and sink.state is ModuleState.RUNNING
                        and not sink.overfill
                    ):
                        if deadline is None:
                            sink.space.wait()
                            continue
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            timed_out = True
                            break
                        sink.space.wait(remaining)  # <= TIMEOUT_MAX (BackPressure)
                finally:
                    sink.waiting -= 1
            if sink.state == FAILED:  # died while we waited
                self._dropped(sink, item, "module failed (its worker ended), dropped the message")
                return True
            if timed_out:
                with sink.stats_lock:
                    sink.refused += 1
                self._trace(
                    REFUSED,
                    sink.name,
                    detail=f"no room within {backpressure.timeout:g} s",
                    extra={"source": item[0], "capacity": sink.capacity},
                )
                return False
        queue.append(item)
        sink.poke()
        return True

    def _dropped(self, sink: _Record, item: _Item, reason: str) -> None:
        with sink.stats_lock:
            sink.dropped += 1
            first = sink.dropped == 1
        if first:
            log.warning("broker module %r: %s (further drops are counted)", sink.name, reason)
        self._trace(
            DROPPED,
            sink.name,
            detail=reason,
            size=len(item[1].content),
            extra={"source": item[0], "capacity": sink.capacity},
        )

    # -- the worker ---------------------------------------------------------------------
    def _work(self, record: _Record) -> None:
        record.ident = threading.get_ident()
        self._by_ident[record.ident] = record
        queue = record.queue
        popleft = queue.popleft
        control = record.control
        receive: Callable[[Message], object] = record.module.receive
        low_water = record.low_water
        tracer = self._message_tracer
        died: BaseException | None = None
        try:
            while True:
                if control:
                    self._run_control(record)
                if queue:
                    # One batch: what is queued now, without a lock per message.
                    for _ in range(len(queue)):
                        if record.abort:
                            break
                        try:
                            source, message = popleft()
                        except IndexError:  # a drop_oldest publisher took it
                            break
                        try:
                            receive(message)
                        except Exception as exc:
                            # Report first, count after: a counter seen implies its event.
                            self._module_failed(record, "receive", exc, source)
                            record.failed += 1
                        except BaseException as exc:  # SystemExit...: the worker ends
                            self._module_failed(record, "receive", exc, source)
                            record.failed += 1
                            raise
                        else:
                            record.delivered += 1
                            if tracer is not None and tracer.active:
                                tracer.event(
                                    DELIVERED,
                                    name=record.name,
                                    size=len(message.content),
                                    extra={"source": source},
                                )
                        if record.waiting and len(queue) <= low_water:
                            with record.space:
                                record.space.notify_all()
                    if record.abort:
                        break
                    continue
                if record.stop:
                    break  # nothing queued and no publisher can add more
                record.sleeping = True
                # Look again after announcing: a publisher that appended before it saw
                # `sleeping` did not wake us.
                if queue or control or record.stop:
                    record.sleeping = False
                    continue
                record.wake.acquire()
                record.sleeping = False
        except BaseException as exc:  # not re-raised: a thread has nobody to raise to
            died = exc
        finally:
            self._finish(record, died)

    def _run_control(self, record: _Record) -> None:
        while record.control:
            self._run_start(record, record.control.popleft())

    def _run_start(self, record: _Record, call: Future[None]) -> None:
        error: BaseException | None = None
        try:
            record.module.start()
        except BaseException as exc:  # a BaseException then ends the worker (re-raised)
            error = exc
            self._module_failed(record, "start", exc, "")
            if not isinstance(exc, Exception):
                raise
        else:
            record.started = True
            self._trace(MODULE_STARTED, record.name)
        finally:
            if error is None:
                call.set_result(None)
            else:
                call.set_exception(error)

    def _finish(self, record: _Record, died: BaseException | None = None) -> None:
        if died is not None:
            self._worker_died(record, died)
        queue = record.queue
        failed = record.state == FAILED
        reason = (
            "module failed (its worker ended) before delivery"
            if failed
            else "module removed before delivery"
        )
        while queue:
            self._dropped(record, queue.popleft(), reason)
        while record.control:  # a start() asked for after removal or death
            record.control.popleft().set_exception(
                BrokerError(f"module {record.name!r} failed (its worker ended)")
                if failed
                else UnknownModuleError(f"module {record.name!r} was removed")
            )
        try:
            record.module.destroy()
        except Exception as exc:
            self._module_failed(record, "destroy", exc, "")
        except BaseException as exc:  # the worker is ending anyway; report, go on
            self._module_failed(record, "destroy", exc, "")
        self._by_ident.pop(record.ident, None)
        if failed:
            # Still attached: the owner sees it failed and removes it (see _remove). Its
            # blocked publishers were released by _worker_died.
            record.done.set()
            return
        record.state = ModuleState.STOPPED
        self._record_removed(record)

    def _record_removed(self, record: _Record) -> None:
        self._final[record.name] = self._stats(record)
        while len(self._final) > MAX_FINAL_STATS:
            del self._final[next(iter(self._final))]
        with record.space:
            record.space.notify_all()
        record.done.set()
        self._trace(
            MODULE_REMOVED,
            record.name,
            extra={
                "delivered": record.delivered,
                "dropped": record.dropped,
                "failed": record.failed,
            },
        )

    def _worker_died(self, record: _Record, exc: BaseException) -> None:
        """The worker is ending on a BaseException. Report it; if the module is still
        attached, mark it failed and make sure nothing can be queued for it any more
        (the caller drains what is there). A module being removed just ends."""
        with self._lock:  # _remove reads and sets the state under it too
            attached = record.state is ModuleState.RUNNING
            if attached:
                record.state = FAILED
        log.error(
            "module %r: its worker ended on %r%s",
            record.name,
            exc,
            "; it stays attached as failed until removed, messages for it are dropped"
            if attached
            else "",
        )
        self._trace(
            MODULE_FAILED,
            record.name,
            detail=f"worker ended: {type(exc).__name__}: {exc}",
            extra={"phase": "worker", "source": "", "error": type(exc).__name__},
        )
        if not attached:
            return
        # Blocked publishers stop waiting and drop (they see FAILED).
        with record.space:
            record.space.notify_all()
        # Barrier, as in _remove: a publish that read the state before it changed appends
        # under its source's lock; once every lock was held once, none can still append,
        # so the drain that follows leaves nothing behind.
        with self._lock:
            sources = list(self._by_name.values())
        for source in sources:
            if source is not record:
                with source.publish_lock:
                    pass

    def _module_failed(self, record: _Record, phase: str, exc: BaseException, source: str) -> None:
        # A failing module may fail on every message: log the first few in full.
        self._failure_logs += 1
        if self._failure_logs <= 20:
            log.error("module %r: %s() raised", record.name, phase, exc_info=exc)
        self._trace(
            MODULE_FAILED,
            record.name,
            detail=f"{type(exc).__name__}: {exc}",
            extra={"phase": phase, "source": source, "error": type(exc).__name__},
        )

    # -- introspection ------------------------------------------------------------------
    def module_names(self) -> list[str]:
        return list(self._by_name)

    def module(self, name: str) -> object:
        """The module object attached as `name`."""
        return self._record(name).module

    def links(self) -> list[LinkInfo]:
        with self._lock:
            return [
                LinkInfo(source, sink, backpressure.describe() if backpressure else "")
                for (source, sink), backpressure in self._links.items()
            ]

    def snapshot(self) -> BrokerSnapshot:
        """Modules (queue depth, counters), links, refcount: plain frozen dataclasses."""
        with self._lock:
            records = list(self._by_name.values())
            links = tuple(self.links())
            refs = self._refs
            closed = self._closed
        modules = tuple(self._stats(r) for r in records)
        return BrokerSnapshot(time.time_ns(), refs, closed, modules, links)

    def final_stats(self, name: str) -> ModuleStats | None:
        """The counters of a removed module as they were when its worker ended."""
        return self._final.get(name)

    @staticmethod
    def _stats(r: _Record) -> ModuleStats:
        return ModuleStats(
            name=r.name,
            kind=r.kind,
            state=r.state,
            started=r.started,
            queue_depth=len(r.queue),
            capacity=r.capacity,
            backpressure=r.backpressure.describe(),
            published=r.published,
            delivered=r.delivered,
            failed=r.failed,
            dropped=r.dropped,
            refused=r.refused,
            blocked_publishers=r.waiting,
        )

    def wait_idle(self, timeout: float) -> bool:
        """True once every queue is empty and no worker is inside receive, within
        `timeout` seconds (for tests and orderly shutdown; it polls the queues)."""
        deadline = time.monotonic() + timeout
        while True:
            records = list(self._by_name.values())
            if all(not r.queue and (r.sleeping or r.done.is_set()) for r in records):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(0.001, remaining))

    # -- helpers ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise BrokerClosedError("the broker was destroyed")

    def _record(self, ref: object) -> _Record:
        if isinstance(ref, str):
            record = self._by_name.get(ref)
            if record is None:
                raise UnknownModuleError(f"no module named {ref!r} is attached")
            return record
        record = self._by_id.get(id(ref))
        if record is None or record.module is not ref:
            raise UnknownModuleError(f"{type(ref).__name__} object is not attached to this broker")
        return record

    def _trace(self, kind: str, name: str, **fields: Any) -> None:
        tracer = self.tracer
        if tracer is not None and tracer.active:
            tracer.event(kind, name=name, **fields)
