"""The broker: modules, links between them, and serial delivery on one worker per module.

Every call is safe from any thread. How it stays fast without a lock per message:

- Each module has a `deque` of pending `(source name, message)` items and one worker
  thread (`worker`). Publishing appends to the sink's deque (atomic) and wakes the
  worker only if it announced that it is going to sleep; the worker takes everything
  queued in one batch.
- A source's routes (its sinks and their back-pressure) are an immutable tuple rebuilt
  on every link change and read under the source's own publish lock, which also makes
  every sink see one source's messages in the same order and lets removal wait out any
  publish that still holds the old routes (see `remove_module`).
- Queues are bounded. A full queue applies the link's or sink's Backpressure: block the
  publisher (default; bounded by a timeout, after which PublishTimeoutError names the
  sink) or drop with a counter and a `broker.dropped` trace event (`delivery`).
Here: modules, links (`links`), removal, references, publishing, introspection.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mailbus.broker.delivery import overflow
from mailbus.broker.errors import (
    BrokerClosedError,
    BrokerError,
    DuplicateModuleError,
    ModuleStartError,
    PublishTimeoutError,
    UnknownModuleError,
)
from mailbus.broker.kinds import BrokerKind
from mailbus.broker.links import WILDCARD, LinkTable
from mailbus.broker.message import BrokerMessage
from mailbus.broker.module import check_module
from mailbus.broker.policy import DEFAULT_BACKPRESSURE, DEFAULT_CAPACITY, Backpressure
from mailbus.broker.record import ModuleRecord, stats_of, wait_out_publishers
from mailbus.broker.snapshot import BrokerSnapshot, LinkInfo, ModuleState, ModuleStats
from mailbus.broker.worker import WorkerHooks, run_worker, start_on_worker
from mailbus.names import check_name
from mailbus.trace import Tracer

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)

DEFAULT_STOP_TIMEOUT = 10.0
MAX_FINAL_STATS = 1024
FAILED = ModuleState.FAILED


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
        self._by_name: dict[str, ModuleRecord] = {}
        self._by_id: dict[int, ModuleRecord] = {}
        # (source or "*", sink) -> the link's own back-pressure, or None for the sink's
        self._links = LinkTable()
        self._failure_logs = 0
        self._by_ident: dict[int, ModuleRecord] = {}  # worker thread ident -> its module
        self._final: dict[str, ModuleStats] = {}  # removed modules' last counters
        if context is not None:  # its modules show in the context's announcements
            self.announced_as = context.add_broker(self)
        self._hooks = WorkerHooks(
            started=self._worker_started,
            failed=self._module_failed,
            died=self._worker_died,
            ended=self._finish,
            trace=self._trace,
            message_tracer=self._message_tracer,
        )

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
        self._trace(
            BrokerKind.DESTROYED, "", detail=", ".join(names), extra={"modules_attached": names}
        )
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
            record = ModuleRecord(name, module, capacity, backpressure)
            thread = threading.Thread(
                target=run_worker, args=(record, self._hooks), name=f"broker-{name}", daemon=True
            )
            record.thread = thread
            self._by_name[name] = record
            self._by_id[id(module)] = record
            self._links.route(self._by_name)  # every source's routes
            thread.start()
        self._trace(
            BrokerKind.MODULE_ADDED, name, extra={"kind": record.kind, "capacity": capacity}
        )
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
        error = start_on_worker(record, timeout, self._hooks)
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
            gone = self._links.remove_module(name)
            record.routes = ()
            self._links.route(self._by_name)  # every source's routes
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
            wait_out_publishers(sources)
        finally:
            if caller is not None:
                caller.overfill -= 1
        record.abort = not drain
        record.stop = True
        record.poke()
        for source_name, sink_name in gone:
            self._trace(
                BrokerKind.LINK_REMOVED, sink_name, extra={"source": source_name, "sink": sink_name}
            )
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
            source_name = self._link_end(source)
            sink_name = self._link_end(sink)
            self._links.add(source_name, sink_name, backpressure)
            self._links.route(self._by_name)  # every source's routes
        self._trace(
            BrokerKind.LINK_ADDED,
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
            source_name = self._link_end(source)
            sink_name = self._link_end(sink)
            self._links.remove(source_name, sink_name)
            self._links.route(self._by_name)  # every source's routes
        self._trace(
            BrokerKind.LINK_REMOVED, sink_name, extra={"source": source_name, "sink": sink_name}
        )

    def _link_end(self, ref: object) -> str:
        return WILDCARD if ref == WILDCARD else self._record(ref).name

    # -- publishing -------------------------------------------------------------------
    def publish(self, source: object, message: BrokerMessage) -> int:
        """Queue `message` for every sink linked to `source` (a module or its name);
        return how many sinks it was queued for (or dropped by their policy)."""
        if self._closed:
            raise BrokerClosedError("the broker was destroyed")
        record = self._record(source)
        if not isinstance(message, BrokerMessage):
            raise TypeError(f"publish takes a BrokerMessage, not {type(message).__name__}")
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
                elif not overflow(sink, backpressure, item, self._trace):
                    refused = [] if refused is None else refused
                    refused.append(sink.name)
                    timeout = backpressure.timeout or 0.0
        tracer = self._message_tracer
        if tracer is not None and tracer.active:
            tracer.event(
                BrokerKind.PUBLISHED,
                name=record.name,
                size=len(message.content),
                extra={"sinks": [sink.name for sink, _ in routes]},
            )
        if refused:
            raise PublishTimeoutError(record.name, tuple(refused), timeout)
        return len(routes)

    # -- the worker ---------------------------------------------------------------------
    # -- what the workers report (WorkerHooks) ------------------------------------------
    def _worker_started(self, record: ModuleRecord) -> None:
        self._by_ident[record.ident] = record

    def _finish(self, record: ModuleRecord) -> None:
        """The worker has ended (after `wind_down`): the last of the bookkeeping."""
        self._by_ident.pop(record.ident, None)
        if record.state == FAILED:
            # Still attached: the owner sees it failed and removes it (see _remove). Its
            # blocked publishers were released by _worker_died.
            record.done.set()
            return
        record.state = ModuleState.STOPPED
        self._record_removed(record)

    def _record_removed(self, record: ModuleRecord) -> None:
        self._final[record.name] = stats_of(record)
        while len(self._final) > MAX_FINAL_STATS:
            del self._final[next(iter(self._final))]
        with record.space:
            record.space.notify_all()
        record.done.set()
        self._trace(
            BrokerKind.MODULE_REMOVED,
            record.name,
            extra={
                "delivered": record.delivered,
                "dropped": record.dropped,
                "failed": record.failed,
            },
        )

    def _worker_died(self, record: ModuleRecord, exc: BaseException) -> None:
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
            BrokerKind.MODULE_FAILED,
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
        wait_out_publishers(s for s in sources if s is not record)

    def _module_failed(
        self, record: ModuleRecord, phase: str, exc: BaseException, source: str
    ) -> None:
        # A failing module may fail on every message: log the first few in full.
        self._failure_logs += 1
        if self._failure_logs <= 20:
            log.error("module %r: %s() raised", record.name, phase, exc_info=exc)
        self._trace(
            BrokerKind.MODULE_FAILED,
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
            return self._links.infos()

    def snapshot(self) -> BrokerSnapshot:
        """Modules (queue depth, counters), links, refcount: plain frozen dataclasses."""
        with self._lock:
            records = list(self._by_name.values())
            links = tuple(self.links())
            refs = self._refs
            closed = self._closed
        modules = tuple(stats_of(r) for r in records)
        return BrokerSnapshot(time.time_ns(), refs, closed, modules, links)

    def final_stats(self, name: str) -> ModuleStats | None:
        """The counters of a removed module as they were when its worker ended."""
        return self._final.get(name)

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

    def _record(self, ref: object) -> ModuleRecord:
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
