"""A module's worker thread: serial delivery of its queue, without a lock per message.

Publishing appends to the module's deque (atomic) and wakes the worker only if it
announced that it is going to sleep; the worker takes everything queued in one batch.
The wake-up is a raw lock used as a binary semaphore (no Condition, no Event). What the
worker reports, and what it tells the broker when it ends, goes through `WorkerHooks`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass

from mailbus.broker.delivery import drop
from mailbus.broker.errors import BrokerError, UnknownModuleError
from mailbus.broker.kinds import BrokerKind
from mailbus.broker.message import BrokerMessage
from mailbus.broker.record import ModuleRecord
from mailbus.broker.snapshot import ModuleState
from mailbus.trace import Tracer


@dataclass(frozen=True, slots=True)
class WorkerHooks:
    """What a worker needs from its broker."""

    started: Callable[[ModuleRecord], None]  # the worker runs (on its thread)
    # (record, phase, error, source module): start, receive or destroy raised
    failed: Callable[[ModuleRecord, str, BaseException, str], None]
    # The worker is ending on this BaseException (before it winds down).
    died: Callable[[ModuleRecord, BaseException], None]
    ended: Callable[[ModuleRecord], None]  # the worker has wound down
    trace: Callable[..., None]  # (kind, module name, **TraceEvent fields)
    message_tracer: Tracer | None  # per-message events (published, delivered), if wanted


def run_worker(record: ModuleRecord, hooks: WorkerHooks) -> None:
    """The body of a module's worker thread: deliver its queue in batches, run its
    start() calls, and sleep when there is nothing to do; until the module is removed or
    a BaseException ends it. Never raises (a thread has nobody to raise to)."""
    record.ident = threading.get_ident()
    hooks.started(record)
    queue = record.queue
    popleft = queue.popleft
    control = record.control
    receive: Callable[[BrokerMessage], object] = record.module.receive
    low_water = record.low_water
    tracer = hooks.message_tracer
    died: BaseException | None = None
    try:
        while True:
            if control:
                _run_control(record, hooks)
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
                        hooks.failed(record, "receive", exc, source)
                        record.failed += 1
                    except BaseException as exc:  # SystemExit...: the worker ends
                        hooks.failed(record, "receive", exc, source)
                        record.failed += 1
                        raise
                    else:
                        record.delivered += 1
                        if tracer is not None and tracer.active:
                            tracer.event(
                                BrokerKind.DELIVERED,
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
        if died is not None:
            hooks.died(record, died)
        wind_down(record, hooks)
        hooks.ended(record)


def _run_control(record: ModuleRecord, hooks: WorkerHooks) -> None:
    while record.control:
        run_start(record, record.control.popleft(), hooks)


def run_start(record: ModuleRecord, call: Future[None], hooks: WorkerHooks) -> None:
    """Run the module's start() (on its worker) and settle `call` with the outcome."""
    error: BaseException | None = None
    try:
        record.module.start()
    except BaseException as exc:  # a BaseException then ends the worker (re-raised)
        error = exc
        hooks.failed(record, "start", exc, "")
        if not isinstance(exc, Exception):
            raise
    else:
        record.started = True
        hooks.trace(BrokerKind.MODULE_STARTED, record.name)
    finally:
        if error is None:
            call.set_result(None)
        else:
            call.set_exception(error)


def wind_down(record: ModuleRecord, hooks: WorkerHooks) -> None:
    """The worker's last acts: drop what is still queued (counted), fail the start()
    calls asked for too late, and call the module's destroy()."""
    queue = record.queue
    failed = record.state == ModuleState.FAILED
    reason = (
        "module failed (its worker ended) before delivery"
        if failed
        else "module removed before delivery"
    )
    while queue:
        drop(record, queue.popleft(), reason, hooks.trace)
    while record.control:  # a start() asked for after removal or death
        record.control.popleft().set_exception(
            BrokerError(f"module {record.name!r} failed (its worker ended)")
            if failed
            else UnknownModuleError(f"module {record.name!r} was removed")
        )
    try:
        record.module.destroy()
    except Exception as exc:
        hooks.failed(record, "destroy", exc, "")
    except BaseException as exc:  # the worker is ending anyway; report, go on
        hooks.failed(record, "destroy", exc, "")


def start_on_worker(
    record: ModuleRecord, timeout: float | None, hooks: WorkerHooks
) -> BaseException | None:
    """Have the module's worker run its start() (so never beside a receive) and wait up
    to `timeout` for it; what start() raised, or None. BrokerError if it did not return
    in time."""
    call: Future[None] = Future()
    if record.ident == threading.get_ident():  # asked from the module's own worker
        run_start(record, call, hooks)
    else:
        record.control.append(call)
        record.poke()
        if not wait([call], timeout).done:
            raise BrokerError(f"module {record.name!r}: start() did not return within {timeout} s")
    return call.exception()
