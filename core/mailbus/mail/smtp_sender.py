"""The SMTP sender: pycurl on one kept-open connection, delivering from a background
thread so that publish() never waits on the network.

- `smtp://` upgrades with STARTTLS (required, never plain); `smtps://` is implicit TLS.
  Both authenticate with the configured username and password.
- One pycurl handle lives for the sender's life: libcurl keeps its connection open
  between messages (a new SMTPS connection costs about 40 ms here) and opens a new one
  by itself when the server has dropped it.
- A failed attempt is reported as a `mail.send_failed` trace event and counted, then
  retried with capped exponential back-off, in order: the email is never only a log
  line, and later emails wait behind it. A permanent refusal (SMTP 5xx) is reported as
  `mail.send_rejected` and that email alone is given up.
- Recipients are refused one by one: with CURLOPT_MAIL_RCPT_ALLOWFAILS the email still
  goes to the recipients the server accepted. Which RCPT was refused is read from
  libcurl's protocol trace (mailbus.mail.rcpt); a 5xx recipient is reported in a
  `mail.send_rejected` naming it (`extra.recipients`), a 4xx recipient is retried alone.
- `check_login()` (called at init by `create_transport`) opens the connection and
  authenticates, so a wrong password or an unreachable server is an error there.
- With `[signing]` options every email is signed (DKIM) as it is built, before it is
  queued: what the server gets is exactly what was signed.
- `send_sync()` delivers at once and raises on failure (`permanent = True` for a 5xx):
  the durable outbox calls it from its own thread and does its own retrying.
"""

from __future__ import annotations

import io
import logging
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from urllib.parse import urlsplit

import pycurl

from mailbus.backoff import Backoff
from mailbus.email_message import Email, encode, validate
from mailbus.errors import TransportError
from mailbus.mail.errors import MailConnectError, MailLoginError, MailTLSError
from mailbus.mail.kinds import MailKind
from mailbus.mail.outcome import Outcome, settle
from mailbus.mail.rcpt import RcptReply, RcptTracker
from mailbus.mail.tls import TlsSettings, curl_options, warn_unverified
from mailbus.names import check_address
from mailbus.options import check_url
from mailbus.trace import Tracer
from mailbus.transport import EmailSender

log = logging.getLogger(__name__)

SENT = MailKind.SENT
SEND_FAILED = MailKind.SEND_FAILED
SEND_REJECTED = MailKind.SEND_REJECTED
SEND_ABANDONED = MailKind.SEND_ABANDONED
DEFAULT_MAX_PENDING = 10_000
# CURLOPT_MAIL_RCPT_ALLOWFAILS (libcurl >= 7.69; CURLOPTTYPE_LONG + 290): pycurl 7.49
# has no name for it.
MAIL_RCPT_ALLOWFAILS: int = getattr(pycurl, "MAIL_RCPT_ALLOWFAILS", 290)


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    url: str
    username: str
    password: str = field(repr=False)
    tls: TlsSettings = field(default_factory=TlsSettings)
    # Envelope recipients when an email names none (its own account, by default).
    default_recipients: tuple[str, ...] = ()
    connect_timeout_s: float = 10.0
    timeout_s: float = 60.0
    # Signs the built bytes (a DKIM-Signature in front): mailbus.signing.sign.Signer.sign.
    sign: Callable[[bytes], bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_url("url-smtp", self.url, ("smtp", "smtps"))  # messages show it redacted

    @property
    def server(self) -> str:
        """The URL without path or query, for messages (never carries credentials)."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"


class Failure(Enum):
    TRANSIENT = "transient"  # retry: network, server down, timeouts, 4xx
    REJECTED = "rejected"  # give up this email: the server said 5xx to it
    LOGIN = "login"  # wrong credentials: retried, but reported as such
    TLS = "tls"  # certificate did not verify, or no STARTTLS


_LOGIN_CODES = {pycurl.E_LOGIN_DENIED}
_TLS_CODES = {
    pycurl.E_PEER_FAILED_VERIFICATION,
    pycurl.E_SSL_CONNECT_ERROR,
    pycurl.E_USE_SSL_FAILED,
    pycurl.E_SSL_CACERT_BADFILE,
}
_CONNECT_CODES = {
    pycurl.E_COULDNT_CONNECT,
    pycurl.E_COULDNT_RESOLVE_HOST,
    pycurl.E_OPERATION_TIMEDOUT,
}


def classify(curl_code: int, smtp_code: int) -> Failure:
    """What a failed transfer means (sans-IO: codes in, decision out)."""
    if curl_code in _LOGIN_CODES or smtp_code == 535:
        return Failure.LOGIN
    if curl_code in _TLS_CODES:
        return Failure.TLS
    # 5xx to MAIL, RCPT or DATA: this email will never be accepted as it is.
    if 500 <= smtp_code < 600 and curl_code not in _CONNECT_CODES:
        return Failure.REJECTED
    return Failure.TRANSIENT


def failure_text(smtp_code: int, message: str, size: int) -> str:
    """curl's words for a failed transaction, plus what the code means where curl
    gives only the number ("MAIL failed: 552"). 552 is an email too large for the
    server (RFC 1870's answer to MAIL FROM with SIZE=, Postfix's message_size_limit)
    or, at DATA, for the mailbox's storage (RFC 5321)."""
    if smtp_code == 552:
        return (
            f"{message}: the email of {size:,} bytes is over the server's size limit "
            "(or the mailbox's storage); it will never be accepted as it is"
        )
    return message


@dataclass(slots=True)
class _Outgoing:
    data: bytes
    mail_from: str
    recipients: tuple[str, ...]
    message_id: str
    subject: str
    queued_ns: int
    attempts: int = 0
    delivered: bool = False  # an earlier attempt reached some recipients


class SmtpSender(EmailSender):
    def __init__(
        self,
        settings: SmtpSettings,
        tracer: Tracer | None = None,
        *,
        backoff: Backoff | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.settings = settings
        self.tracer = tracer or Tracer()
        self.backoff = backoff or Backoff(initial=0.2, maximum=10.0)
        self.max_pending = max_pending
        self.counters: Counter[str] = Counter()
        self._pending: deque[_Outgoing] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._abort = threading.Event()
        self._curl = self._new_handle()
        # The delivery thread and send_sync callers share the one connection.
        self._curl_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._in_flight = False
        self._rcpt = RcptTracker()

    # -- the handle -----------------------------------------------------------------------
    def _new_handle(self) -> pycurl.Curl:
        s = self.settings
        curl = pycurl.Curl()
        curl.setopt(pycurl.URL, s.server)
        curl.setopt(pycurl.USERNAME, s.username)
        curl.setopt(pycurl.PASSWORD, s.password)
        if s.url.startswith("smtp://"):
            curl.setopt(pycurl.USE_SSL, pycurl.USESSL_ALL)  # STARTTLS or fail
        for option, value in curl_options(s.tls):
            curl.setopt(option, value)
        curl.setopt(pycurl.NOSIGNAL, 1)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, int(s.connect_timeout_s * 1000))
        curl.setopt(pycurl.TIMEOUT_MS, int(s.timeout_s * 1000))
        curl.setopt(pycurl.TCP_KEEPALIVE, 1)
        curl.setopt(pycurl.TCP_NODELAY, 1)
        # One refused recipient must not cost the others the email; which one was
        # refused is read from the protocol trace (switched on per transfer).
        curl.setopt(MAIL_RCPT_ALLOWFAILS, 1)
        curl.setopt(pycurl.DEBUGFUNCTION, self._debug)
        return curl

    def _debug(self, kind: int, data: bytes) -> None:
        # Called by libcurl in the thread that performs, under _curl_lock.
        if kind == pycurl.INFOTYPE_HEADER_OUT:
            self._rcpt.sent(data)
        elif kind == pycurl.INFOTYPE_HEADER_IN:
            self._rcpt.received(data)

    def _after_transfer(self) -> None:
        if self._curl.getinfo(pycurl.NUM_CONNECTS):
            self.counters["connections_opened"] += 1
            warn_unverified(self.settings.tls, self.settings.server, self.tracer)

    def _error(self, exc: pycurl.error) -> tuple[int, int, str]:
        code = int(exc.args[0])
        message = str(exc.args[1]) if len(exc.args) > 1 else ""
        try:
            smtp_code = int(self._curl.getinfo(pycurl.RESPONSE_CODE))
        except pycurl.error:
            smtp_code = 0
        return code, smtp_code, message

    def check_login(self) -> None:
        """Connect, start TLS and authenticate now (NOOP); raise a clear error if that
        fails. The connection stays open for the first email."""
        curl = self._curl
        curl.setopt(pycurl.CUSTOMREQUEST, "NOOP")
        curl.setopt(pycurl.NOBODY, 1)
        try:
            curl.perform()
        except pycurl.error as exc:
            code, smtp_code, message = self._error(exc)
            where = self.settings.server
            kind = classify(code, smtp_code)
            if kind is Failure.LOGIN:
                raise MailLoginError(
                    f"SMTP login to {where} as {self.settings.username!r} was refused: "
                    "check username and password (MAILBUS_PASSWORD)"
                ) from None
            if kind is Failure.TLS:
                raise MailTLSError(f"TLS with {where} failed: {message}") from None
            raise MailConnectError(f"cannot reach SMTP server {where}: {message}") from None
        finally:
            curl.unsetopt(pycurl.CUSTOMREQUEST)
            curl.setopt(pycurl.NOBODY, 0)
        self._after_transfer()

    # -- EmailSender ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the delivery thread (once; `send` starts it if needed)."""
        with self._cond:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="mailbus-smtp", daemon=True)
        self._thread.start()

    def _outgoing(self, email: Email) -> _Outgoing:
        data = encode(email)
        if self.settings.sign is not None:
            data = self.settings.sign(data)  # in the caller too: the queue holds it signed
        recipients = email.recipients or self.settings.default_recipients
        if not recipients:
            raise TransportError("email has no recipients and no default recipient is set")
        return _Outgoing(
            data,
            check_address(email.sender),
            recipients,
            email.message_id,
            email.subject,
            time.time_ns(),
        )

    def deliver(self, email: Email) -> None:
        """Queue `email` for the delivery thread and return at once."""
        item = self._outgoing(email)
        with self._cond:
            if self._closing:
                raise TransportError("SMTP sender is closed")
            if len(self._pending) >= self.max_pending:
                self.counters["send_refused_full"] += 1
                raise TransportError(
                    f"{len(self._pending)} emails are waiting for {self.settings.server}; "
                    "refusing more until the server takes them"
                )
            self._pending.append(item)
            self._cond.notify_all()
        self.start()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every email handed over so far was sent or given up."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is pending for up to `timeout` seconds, then give up the rest
        (reported as `mail.send_abandoned`)."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                self._abort.set()
                thread.join(self.settings.timeout_s)
        self._abandon_rest()
        with self._curl_lock:
            self._curl.close()

    # -- the delivery thread ------------------------------------------------------------------
    def _abandon_rest(self) -> None:
        with self._cond:
            lost = list(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        if lost:
            self.counters["send_abandoned"] += len(lost)
            self.tracer.event(
                SEND_ABANDONED,
                detail=f"closed with {len(lost)} emails not sent to {self.settings.server}",
                extra={"count": len(lost), "message_ids": [o.message_id for o in lost][:100]},
            )
            log.error("SMTP sender closed with %d emails not sent", len(lost))

    def _run(self) -> None:
        while not self._abort.is_set():
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                item = self._pending[0]
            delay = self._attempt(item)
            if delay is None:
                with self._cond:
                    if self._pending and self._pending[0] is item:
                        self._pending.popleft()
                    self._cond.notify_all()
            elif self._abort.wait(delay):
                return

    def _transfer(self, item: _Outgoing) -> tuple[tuple[int, int, str] | None, list[RcptReply]]:
        """One SMTP transaction on the kept connection: the failure's codes (or None)
        and the server's reply to each RCPT TO."""
        item.attempts += 1
        with self._curl_lock:
            curl = self._curl
            self._rcpt.reset()
            curl.setopt(pycurl.MAIL_FROM, f"<{item.mail_from}>")
            curl.setopt(pycurl.MAIL_RCPT, list(item.recipients))
            curl.setopt(pycurl.UPLOAD, 1)
            curl.setopt(pycurl.READFUNCTION, io.BytesIO(item.data).read)
            curl.setopt(pycurl.INFILESIZE, len(item.data))
            # The trace passes every chunk of the email (and of TLS) through Python: only
            # worth it when there is more than one recipient to tell apart. One
            # recipient's refusal is the transfer's own result.
            curl.setopt(pycurl.VERBOSE, len(item.recipients) > 1)
            try:
                curl.perform()
            except pycurl.error as exc:
                code, smtp_code, message = self._error(exc)
                failure = (code, smtp_code, failure_text(smtp_code, message, len(item.data)))
                # A fresh handle after a failure: a half-broken connection is not reused.
                self._curl.close()
                self._curl = self._new_handle()
                return failure, list(self._rcpt.replies)
            self._after_transfer()
            replies = list(self._rcpt.replies)
        self.counters["sent"] += 1
        if self.tracer.active:
            self.tracer.event(
                SENT,
                name=item.subject,
                message_id=item.message_id,
                size=len(item.data),
                extra={"attempts": item.attempts, "queued_ns": item.queued_ns},
            )
        return None, replies

    def _attempt(self, item: _Outgoing) -> float | None:
        """Try to send `item`; None when done with it, else the delay before a retry."""
        outcome = self._settle(item, *self._transfer(item))
        if outcome.done or outcome.failure is None:
            return None
        return self._failed(item, *outcome.failure)

    def _settle(
        self, item: _Outgoing, failure: tuple[int, int, str] | None, replies: list[RcptReply]
    ) -> Outcome:
        """Report the recipients refused for good; keep only those to try again."""
        outcome = settle(item.recipients, failure, replies)
        item.delivered = item.delivered or outcome.delivered
        if outcome.rejected:
            self._rejected_recipients(item, outcome)
        if not outcome.done:
            item.recipients = outcome.retry
        return outcome

    def _rejected_recipients(self, item: _Outgoing, outcome: Outcome) -> None:
        names = [r.address for r in outcome.rejected]
        first = outcome.rejected[0]
        self.counters["send_rejected"] += 1
        self.counters["recipients_rejected"] += len(names)
        reached = "the other recipients got it" if item.delivered else "no recipient got it"
        self.tracer.event(
            SEND_REJECTED,
            name=item.subject,
            message_id=item.message_id,
            detail=(
                f"{self.settings.server} refused recipient(s) {', '.join(names)}: "
                f"{first.code} {first.text}; {reached}"
            ),
            extra={
                "recipients": names,
                "smtp_code": first.code,
                "smtp_codes": [r.code for r in outcome.rejected],
                "attempt": item.attempts,
                "reason": Failure.REJECTED.value,
                "server": self.settings.server,
                "delivered_to_others": item.delivered,
            },
        )
        log.error("SMTP server refused %s for %s", item.message_id, ", ".join(names))

    def send_sync(self, email: Email) -> None:
        """Deliver `email` now and return once the server accepted it; raise
        TransportError if it did not, with `permanent = True` when the server refused
        the email for good (5xx). No retry here: for the durable outbox, which keeps the
        email on disk and retries by its own policy."""
        validate(email)  # the outbox's way in, beside `send`
        item = self._outgoing(email)
        if self._closing:
            raise TransportError("SMTP sender is closed")
        outcome = self._settle(item, *self._transfer(item))
        if outcome.done:
            if outcome.delivered or not outcome.rejected:
                return
            names = ", ".join(r.address for r in outcome.rejected)
            error = TransportError(f"{self.settings.server} refused every recipient: {names}")
            error.permanent = True  # type: ignore[attr-defined]
            raise error
        assert outcome.failure is not None  # not done: something to report
        code, smtp_code, message = outcome.failure
        kind = classify(code, smtp_code)
        self._failed(item, code, smtp_code, message, retry=False)
        error = TransportError(f"send to {self.settings.server} failed ({kind.value}): {message}")
        # Deferred recipients (4xx) are retried by the caller with the whole email; the
        # receivers drop the copies they already have by Message-ID.
        error.permanent = kind is Failure.REJECTED  # type: ignore[attr-defined]
        raise error

    def _failed(
        self, item: _Outgoing, code: int, smtp_code: int, message: str, retry: bool = True
    ) -> float | None:
        kind = classify(code, smtp_code)
        fields = {
            "curl_code": code,
            "smtp_code": smtp_code,
            "attempt": item.attempts,
            "reason": kind.value,
            "server": self.settings.server,
            "recipients": list(item.recipients),
        }
        if kind is Failure.REJECTED:
            self.counters["send_rejected"] += 1
            self.tracer.event(
                SEND_REJECTED,
                name=item.subject,
                message_id=item.message_id,
                detail=f"{self.settings.server} refused the email: {message}",
                extra=fields,
            )
            log.error("SMTP server refused %s: %s", item.message_id, message)
            return None
        delay = self.backoff.delay(item.attempts, random.random()) if retry else 0.0
        then = f"retry {item.attempts} in {delay:.2f} s" if retry else "the caller retries"
        self.counters["send_failed"] += 1
        self.tracer.event(
            SEND_FAILED,
            name=item.subject,
            message_id=item.message_id,
            detail=f"send to {self.settings.server} failed ({kind.value}): {message}; {then}",
            extra={**fields, "retry_in_s": delay},
        )
        log.warning("SMTP send failed (%s): %s; %s", kind.value, message, then)
        return delay if retry else None
