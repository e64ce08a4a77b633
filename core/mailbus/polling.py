"""The polling manager: one thread takes what the receiver delivers and hands every
email to the handlers (or, for a receiver that offers it, the sending thread does).
A bad email is reported (trace event, counter) and skipped; the thread never dies on
one."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from mailbus.email_message import Email, from_bytes
from mailbus.envelope import Envelope, open_envelope
from mailbus.errors import EmailFormatError, ForeignEmailError
from mailbus.trace import Kind, Tracer
from mailbus.transport import EmailReceiver, Inbound, RawEmail

if TYPE_CHECKING:
    from mailbus.signing.gate import SignatureGate

log = logging.getLogger(__name__)

Handler = Callable[[Envelope], int]
Counter = Callable[[str], None]
RECENT_IDS = 10_000
MIN_BACKOFF_S = 0.1
MAX_BACKOFF_S = 30.0


class PollingManager:
    def __init__(
        self,
        receiver: EmailReceiver,
        handlers: list[Handler],
        tracer: Tracer,
        count: Counter,
        period: float,
        gate: SignatureGate | None = None,
    ) -> None:
        self._receiver = receiver
        # Signature checks ([signing] options); None: emails are taken unchecked.
        self._gate = gate
        self._handlers = handlers
        self._tracer = tracer
        self._count = count
        self._period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # (sender, Message-ID) of the last RECENT_IDS emails: an at-least-once transport
        # may deliver one twice. The window is in memory: a restart forgets it.
        self._recent: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._deduplicate = True

    def start(self) -> None:
        if self._receiver.set_consumer(self.dispatch):
            # The receiver calls dispatch itself and never delivers twice.
            self._deduplicate = False
            return
        self._thread = threading.Thread(target=self._run, name="mailbus-polling", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._receiver.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            # RuntimeError: never started, Ctrl-C came inside Thread.start() (it waits for
            # the new thread). If it runs after all, it sees _stop and ends by itself.
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        if self._thread is None:
            return not self._stop.is_set()
        return self._thread.is_alive()

    def _run(self) -> None:
        delay = 0.0
        wait = max(self._period, self._receiver.idle_wait_s)
        while not self._stop.is_set():
            try:
                batch = self._receiver.receive(wait)
            except Exception as exc:
                # The receiver reconnects by itself; back off so that a server that is
                # down is not hammered (or the log flooded) at the polling period.
                delay = min(max(delay * 2, self._period, MIN_BACKOFF_S), MAX_BACKOFF_S)
                self._count("receive_errors")
                self._tracer.event(
                    Kind.ERROR, detail=f"receive failed: {exc}", extra={"retry_in_s": delay}
                )
                log.warning("receive failed (retrying in %.1f s): %s", delay, exc)
                self._stop.wait(delay)
                continue
            if delay:
                # Receiving works again after failures: the workbench's badge says so.
                self._tracer.event(Kind.RECONNECTED, detail="receive works again")
            delay = 0.0
            for item in batch:
                self.dispatch(item)

    def dispatch(self, item: Inbound) -> None:
        """Route one inbound email; never raises."""
        reception = time.time_ns()
        gate = self._gate
        signature: str | None = None
        try:
            email = item if isinstance(item, Email) else from_bytes(item.data)
            if gate is not None:
                verdict = gate.verify(email)
                refusal = gate.refusal(verdict)
                if refusal is not None:
                    self._refuse(item, email, *refusal)
                    return
                if verdict is not None:
                    signature = verdict.status
                    if verdict.verified:
                        email = gate.trusted(email, verdict)
            envelope = open_envelope(email, reception)
        except (EmailFormatError, ForeignEmailError) as exc:
            self._skip(item, exc)
            return
        except Exception as exc:
            self._skip(item, exc)
            return
        message_id = email.message_id
        if message_id and self._deduplicate and self._seen_before(email.sender, message_id):
            self._count("duplicates")
            self._tracer.event(
                Kind.SKIPPED, name=email.subject, message_id=message_id, detail="duplicate"
            )
            return
        if signature is not None and gate is not None:
            replayed = gate.replayed(message_id, envelope.info.source_timestamp_ns)
            if replayed is not None:
                self._refuse(item, email, *replayed)
                return
        self._count("received")
        tracer = self._tracer
        if tracer.active:
            info = envelope.info
            tracer.event(
                Kind.RECEIVED,
                name=email.subject,
                source_gid=info.source_gid,
                sequence_number=info.sequence_number,
                message_id=message_id,
                in_reply_to=email.in_reply_to,
                references=email.references,
                source_timestamp_ns=info.source_timestamp_ns,
                reception_timestamp_ns=reception,
                body=email.body,
                size=len(email.body),
                headers=email.headers,
                detail=envelope.kind.value,
                raw=email.raw,
                # Who sent it and to whom: an observer shows the email as it came.
                extra={"from": email.sender, "to": email.to, "cc": email.cc}
                | ({"signature": signature} if signature is not None else {}),
            )
        for handler in self._handlers:
            try:
                handler(envelope)
            except Exception as exc:
                self._count("handler_errors")
                self._tracer.event(Kind.ERROR, name=email.subject, detail=f"handler: {exc!r}")
                log.exception("handler failed on %s", message_id)

    def _seen_before(self, sender: str, message_id: str) -> bool:
        # Keyed on the sender too: one participant cannot suppress another's message.
        key = (sender, message_id)
        with self._recent_lock:
            recent = self._recent
            if key in recent:
                return True
            recent[key] = None
            if len(recent) > RECENT_IDS:
                recent.popitem(last=False)
            return False

    def _refuse(self, item: Inbound, email: Email, kind: str, reason: str) -> None:
        """Keep out an email the signature rules refuse; reported like any skipped one."""
        origin = item.origin if isinstance(item, RawEmail) else item.message_id
        self._count(kind)
        self._tracer.event(
            Kind.SKIPPED,
            name=email.subject,
            message_id=email.message_id,
            detail=reason,
            extra={"origin": origin, "reason": kind, "from": email.sender},
        )
        log.info("refused email %s from %s: %s", origin, email.sender, reason)

    def _skip(self, item: Inbound, exc: Exception) -> None:
        origin = item.origin if isinstance(item, RawEmail) else item.message_id
        kind = "foreign" if isinstance(exc, ForeignEmailError) else "malformed"
        self._count(kind)
        self._tracer.event(
            Kind.SKIPPED,
            detail=f"{kind}: {exc}",
            extra={"origin": origin, "reason": kind},
        )
        log.info("skipped %s email %s: %s", kind, origin, exc)
