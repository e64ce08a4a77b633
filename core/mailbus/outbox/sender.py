"""OutboxSender: an EmailSender that writes each email durably to the outbox and returns;
a background thread delivers through the wrapped sender, with retries.

Delivery is at-least-once: a crash between the inner sender's success and the outbox
recording it sends that email again after restart, with the same Message-ID, and the
receiving side (mailbus.polling) drops the duplicate.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mailbus.email_message import Email, encode, from_bytes, new_message_id
from mailbus.errors import ConfigError, MailbusError, TransportError
from mailbus.options import Options
from mailbus.outbox import admin, control
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.kinds import OutboxKind
from mailbus.outbox.lock import OutboxLock
from mailbus.outbox.retry import RetryPolicy
from mailbus.outbox.scheduler import RecoveryReport, Scheduler
from mailbus.outbox.storage import Destination, Entry, Metadata, RetryLaterError, Schedule
from mailbus.trace import Tracer
from mailbus.transport import EmailReceiver, EmailSender, Inbound, Transport

log = logging.getLogger(__name__)
# How often the delivery thread looks for control requests (`mailbus queue retry/purge`
# from another process), also while it waits or delivers a long run of mail.
CONTROL_POLL_S = 0.25


def email_for_delivery(entry: Entry, data: bytes) -> Email:
    """The Email to hand to the inner sender: parsed from the stored bytes (kept in
    `raw`), with the Bcc recipients, which the bytes never show, from the metadata."""
    email = from_bytes(data)
    shown = set(email.to) | set(email.cc)
    bcc = tuple(r for r in entry.metadata.recipients if r not in shown)
    return dataclasses.replace(email, bcc=bcc, sender=entry.metadata.sender or email.sender)


class OutboxSender(EmailSender):
    """Wraps `inner`: `send` enqueues durably and returns; a thread delivers.

    The inner sender must not report success before the server has the email: its
    `send_sync(email)` is used when it has one, else its `send(email)`, which must then
    block until the server accepted the email and raise on failure (TransportError; set
    `permanent = True` on the exception for a refusal that retrying cannot fix).

    Opening takes the outbox directory's lock (waiting up to `lock_timeout` seconds,
    OutboxLockedError after that) and recovers what a previous process left, at once.
    While running, the delivery thread also carries out the retry/purge requests that
    `mailbus.outbox.admin.run` leaves in `<dir>/control/` (see mailbus.outbox.control).
    """

    def __init__(
        self,
        inner: EmailSender,
        directory: str | os.PathLike[str],
        *,
        policy: RetryPolicy | None = None,
        tracer: Tracer | None = None,
        lock_timeout: float = 0.0,
        start: bool = True,
    ) -> None:
        self.inner = inner
        # The outbox may only record a send as done once the server has the email. A
        # sender that queues in memory and returns at once provides `send_sync`, which
        # blocks until the server accepted (or raises); plain senders block in `send`.
        send_sync = getattr(inner, "send_sync", None)
        self._send_sync: Callable[[Email], None] = send_sync if callable(send_sync) else inner.send
        self.tracer = tracer
        self.storage = FsStorage(directory)
        self.lock = OutboxLock(self.storage.lock_path)
        self.lock.acquire(lock_timeout)
        self._stop = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._control_checked = 0.0
        self._control_error = ""
        try:
            control.control_dir(self.storage.root)
            self.scheduler = Scheduler(self.storage, self._deliver, policy=policy, tracer=tracer)
            self.recovery: RecoveryReport = self.scheduler.recover()
        except BaseException:
            self.lock.release()
            raise
        if start:
            self.start()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mailbus-outbox", daemon=True)
            self._thread.start()
            # Only now: admin waits for an answer only from a holder that says it serves.
            self.lock.set_note(control.SERVES_CONTROL)

    def _deliver(self, entry: Entry, data: bytes) -> None:
        self._send_sync(email_for_delivery(entry, data))

    def _run(self) -> None:
        scheduler = self.scheduler
        while not self._stop.is_set():
            try:
                self._serve_control()
                scheduler.run_due(self._serve_control)
            except Exception as exc:
                # Storage trouble outside one entry (listing, I/O): report, pause, go on.
                log.exception("outbox delivery loop failed")
                if self.tracer is not None and self.tracer.active:
                    self.tracer.event(OutboxKind.STORAGE_ERROR, detail=f"delivery loop: {exc}")
                self._stop.wait(1.0)
            # Bounded: control requests come from other processes, which cannot notify.
            scheduler.wait_for_work(CONTROL_POLL_S, self._stop.is_set)

    def _trace(self, kind: str, detail: str, **extra: object) -> None:
        if self.tracer is not None and self.tracer.active:
            self.tracer.event(kind, detail=detail, extra=extra)

    def _serve_control(self) -> None:
        """Carry out waiting control requests (at most every CONTROL_POLL_S), on the
        delivery thread, between deliveries: nothing is being sent meanwhile."""
        now = time.monotonic()
        if now - self._control_checked < CONTROL_POLL_S:
            return
        self._control_checked = now
        root = self.storage.root
        try:
            for incoming in control.scan(root):
                if incoming.rejected:
                    self._reject(incoming)
                elif incoming.abandoned:
                    control.answer(
                        root,
                        control.Result(
                            incoming.request_id,
                            error="a sender took this request and stopped before answering; "
                            "it may be partly done",
                        ),
                    )
                elif incoming.request is not None:
                    self._apply(incoming.request)
            self._control_error = ""
        except (OSError, MailbusError) as exc:
            # Said once, not every poll: the next change of error is said again.
            if str(exc) != self._control_error:
                self._control_error = str(exc)
                log.warning("outbox: control requests cannot be served: %s", exc)
                self._trace(OutboxKind.STORAGE_ERROR, f"control: {exc}")

    def _reject(self, incoming: control.Incoming) -> None:
        root = self.storage.root
        target = control.set_aside(root, incoming.name)
        log.warning(
            "outbox: set aside control/%s as corrupt/%s: %s",
            incoming.name,
            target.name,
            incoming.rejected,
        )
        self._trace(OutboxKind.CONTROL_REJECTED, incoming.rejected, file=incoming.name)
        if incoming.request_id:
            error = f"request refused: {incoming.rejected} (set aside as corrupt/{target.name})"
            control.answer(root, control.Result(incoming.request_id, error=error))

    def _apply(self, request: control.ControlRequest) -> None:
        applied = admin.Applied()
        error = ""
        try:
            admin.apply(self.storage, request, applied, by_sender=True)
        except (OSError, MailbusError) as exc:
            error = str(exc)
        except Exception as exc:
            # A bug here must still answer the admin and keep the sender running.
            log.exception("outbox: control request %s failed", request.request_id)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            # What changed on disk changes in memory too, also after an error.
            scheduler = self.scheduler
            scheduler.forget(applied.done)  # removed or requeued: re-added below
            scheduler.add(applied.requeued, forced=True)  # asked for now, past any hold
        control.answer(
            self.storage.root, control.Result(request.request_id, tuple(applied.done), error)
        )
        self._trace(
            OutboxKind.CONTROL,
            error or f"{request.action}: {len(applied.done)} done",
            action=request.action,
            request_id=request.request_id,
            done=len(applied.done),
        )

    def deliver(self, email: Email) -> None:
        """Store `email` durably, then return; raise TransportError (StorageFullError
        when the disk is full) if it cannot be stored."""
        if self._closed:
            raise TransportError("outbox sender is closed")
        if not email.message_id:
            email = email.with_message_id(new_message_id(email.sender))
        data = encode(email)
        now = time.time_ns()
        metadata = Metadata(
            message_id=email.message_id,
            sender=email.sender,
            recipients=email.recipients,
            subject=email.subject,
            size=len(data),
            created_ns=now,
        )
        enqueuer = self.storage.enqueue()
        try:
            enqueuer.write(data)
            entries = enqueuer.commit([Destination(metadata, Schedule(0, now, 0, ""))])
        except BaseException:
            enqueuer.abort()
            raise
        self.scheduler.add(entries)
        tracer = self.tracer
        if tracer is not None and tracer.active:
            for entry in entries:
                tracer.event(
                    OutboxKind.ENQUEUED,
                    name=metadata.subject,
                    message_id=metadata.message_id,
                    size=metadata.size,
                    extra={
                        "entry": entry.id,
                        "mail": entry.mail,
                        "destination": ", ".join(metadata.recipients),
                    },
                )

    def outbox_depth(self) -> int:
        """Emails stored and not yet delivered (participant announcements show it)."""
        return self.scheduler.pending()

    def retry_now(self, entry_ids: list[str] | None = None) -> int:
        return self.scheduler.retry_now(entry_ids)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is due or being sent (mail waiting for a retry later does
        not count); False if that did not happen within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        scheduler = self.scheduler
        with scheduler.changed:
            while True:
                if scheduler.idle_locked():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # Bounded: an entry may become due by the clock, without a notify.
                scheduler.changed.wait(min(left, 0.05))

    def close(self, timeout: float = 5.0) -> None:
        """Stop delivering and release the outbox; unsent mail stays stored for the
        next start. Closes the inner sender too."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        with self.scheduler.changed:
            self.scheduler.changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("outbox thread still delivering after %.1f s", timeout)
        try:
            self.inner.close()
        finally:
            if self._thread is None or not self._thread.is_alive():
                try:
                    # The next start (or another version) finds the layout durable
                    # on its own and an empty journal.
                    self.storage.checkpoint()
                except RetryLaterError as exc:
                    log.warning("outbox: %s (the next start replays the journal)", exc)
                finally:
                    self.storage.close()
                    self.lock.release()


class QueueingReceiver(EmailReceiver):
    """Wraps a receiver and declines direct dispatch (`set_consumer`), so that the
    engine's receiving loop, which drops duplicates by Message-ID, sees every email:
    under an outbox, delivery is at-least-once whatever the transport."""

    def __init__(self, inner: EmailReceiver) -> None:
        self.inner = inner
        self.idle_wait_s = inner.idle_wait_s

    def receive(self, timeout: float | None) -> list[Inbound]:
        return self.inner.receive(timeout)

    def wake(self) -> None:
        self.inner.wake()

    def follow(
        self, topics: frozenset[str], services: frozenset[str], clients: frozenset[str]
    ) -> None:
        # The routed email mode reads only the folders of what the context receives.
        self.inner.follow(topics, services, clients)

    def close(self) -> None:
        self.inner.close()


def outbox_directory(section: Mapping[str, Any]) -> str:
    value = section.get("dir")
    if not isinstance(value, str) or not value:
        raise ConfigError("outbox.dir", "expected the outbox directory (a non-empty string)")
    return os.path.expanduser(value)


def wrap_transport(transport: Transport, options: Options, tracer: Tracer) -> Transport:
    """Put an OutboxSender under `transport`'s sender when the options have an
    `[outbox]` table (keys: dir, lock-timeout-s, and the RetryPolicy keys)."""
    section = options.sections.get("outbox")
    if section is None:
        return transport
    unknown = sorted(set(section) - {"dir", "lock-timeout-s", *RetryPolicy.KEYS})
    if unknown:
        raise ConfigError(f"outbox.{unknown[0]}", "unknown key")
    lock_timeout = section.get("lock-timeout-s", 0.0)
    if isinstance(lock_timeout, bool) or not isinstance(lock_timeout, int | float):
        raise ConfigError("outbox.lock-timeout-s", f"expected a number, got {lock_timeout!r}")
    sender = OutboxSender(
        transport.sender,
        outbox_directory(section),
        policy=RetryPolicy.from_mapping(section),
        tracer=tracer,
        lock_timeout=float(lock_timeout),
    )
    receiver = QueueingReceiver(transport.receiver)
    return Transport(sender, receiver, name=f"{transport.name}+outbox")
