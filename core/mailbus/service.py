"""Service clients and servers: requests and responses carried as emails.

A response names its request through In-Reply-To/References and carries the client's
GID and the request's sequence number. A client accepts one response per request it
has pending: a duplicate (a second server answering, a redelivered email) or a response
to a request it never sent is discarded and counted. Unlike the reference, which
discarded any response not newer than the last one received, an older pending request
answered late is still delivered: emails arrive out of order.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from concurrent.futures import CancelledError, Future

from mailbus import headers as H
from mailbus.email_message import Email, new_message_id
from mailbus.envelope import Request, Response
from mailbus.errors import ContextError, ServiceTimeoutError
from mailbus.gid import new_gid
from mailbus.host import EntityHost
from mailbus.names import check_name
from mailbus.trace import Kind, trace_sent
from mailbus.waitable import Waitable

MAX_PENDING = 100_000  # unanswered requests a client remembers; older ones are forgotten


class ServiceClient(Waitable):
    def __init__(self, context: EntityHost, service: str) -> None:
        super().__init__()
        self.service = check_name(service, "service")
        self.gid = new_gid()
        self.discarded = 0
        self._sequence = itertools.count(1)
        self._pending: dict[int, float] = {}  # sequence number -> time sent (ns)
        # Blocked call() per sequence number: its response, or cancelled at shutdown.
        self._calls: dict[int, Future[Response]] = {}
        self._responses: deque[Response] = deque()
        self._lock = threading.Lock()
        self.host = context
        context.register(self)

    def __repr__(self) -> str:
        return f"ServiceClient({self.service!r}, pending={len(self._pending)})"

    @property
    def pending(self) -> int:
        return len(self._pending)

    def is_ready(self) -> bool:
        return bool(self._responses)

    def send_request(self, body: str) -> int:
        """Send a request; return its sequence number. Take the response later."""
        return self._send(body, None)

    def _send(self, body: str, slot: Future[Response] | None) -> int:
        context = self.host
        context.check_open()
        timestamp = time.time_ns()
        with self._lock:
            sequence = next(self._sequence)
            self._pending[sequence] = timestamp
            if slot is not None:
                self._calls[sequence] = slot
            if len(self._pending) > MAX_PENDING:
                # Requests sent and never answered nor forgotten: forget the oldest one
                # (not a blocked call), so that the table stays bounded.
                for old in self._pending:
                    if old not in self._calls:
                        del self._pending[old]
                        break
        email = context.outgoing(
            self.service,
            body,
            {
                H.SOURCE_TIMESTAMP: str(timestamp),
                H.CLIENT_GID: self.gid,
                H.REQUEST_SEQUENCE_NUMBER: str(sequence),
            },
        )
        try:
            context.sender.send(email)
        except BaseException:
            with self._lock:
                self._pending.pop(sequence, None)
                self._calls.pop(sequence, None)
            raise
        tracer = context.tracer
        if tracer.active:
            trace_sent(tracer, Kind.REQUEST_SENT, email, self.gid, sequence, timestamp)
        return sequence

    def take_response(self) -> Response | None:
        try:
            return self._responses.popleft()
        except IndexError:
            return None

    def call(self, body: str, timeout: float) -> Response:
        """Send a request and block until its response arrives or `timeout` seconds pass
        (ServiceTimeoutError). A negative timeout waits for ever."""
        slot: Future[Response] = Future()
        sequence = self._send(body, slot)
        forever = timeout < 0 or timeout > threading.TIMEOUT_MAX
        try:
            return slot.result(None if forever else timeout)
        except (TimeoutError, CancelledError):
            pass
        with self._lock:
            self._calls.pop(sequence, None)
            self._pending.pop(sequence, None)
        if slot.done() and not slot.cancelled():  # arrived while we gave up
            return slot.result()
        if not self.host.is_initialized:
            raise ContextError(f"context shut down while calling {self.service!r}")
        raise ServiceTimeoutError(
            f"no response from service {self.service!r} to request {sequence} within {timeout} s"
        )

    def abort_calls(self) -> None:
        """Release every blocked call: the context is shutting down."""
        with self._lock:
            slots = list(self._calls.values())
            self._calls.clear()
        for slot in slots:
            slot.cancel()

    def forget(self, sequence: int) -> None:
        """Stop waiting for the response to `sequence`; a late one will be discarded."""
        with self._lock:
            self._pending.pop(sequence, None)

    def deliver(self, response: Response) -> bool:
        """Hand `response` to the call awaiting it, or queue it for `take_response`; False
        (counted, traced as discarded) when no call awaits its sequence number."""
        sequence = response.sequence_number
        with self._lock:
            accepted = self._pending.pop(sequence, None) is not None
            slot = self._calls.pop(sequence, None) if accepted else None
            if not accepted:
                self.discarded += 1
        tracer = self.host.tracer
        if not accepted:
            self.host.increment("discarded")
            if tracer.active:
                tracer.event(
                    Kind.DISCARDED,
                    name=self.service,
                    gid=self.gid,
                    source_gid=response.info.source_gid,
                    sequence_number=sequence,
                    message_id=response.email.message_id,
                    in_reply_to=response.in_reply_to,
                    detail="duplicate or unknown sequence number",
                )
            return False
        if tracer.active:
            tracer.event(
                Kind.RESPONSE_MATCHED,
                name=self.service,
                gid=self.gid,
                source_gid=response.info.source_gid,
                sequence_number=sequence,
                message_id=response.email.message_id,
                in_reply_to=response.in_reply_to,
                source_timestamp_ns=response.info.source_timestamp_ns,
                reception_timestamp_ns=response.info.reception_timestamp_ns,
                body=response.body,
                size=len(response.body),
            )
        if slot is not None:
            slot.set_result(response)
        else:
            self._responses.append(response)
            self.wake()
        return True

    def close(self) -> None:
        self.host.unregister(self)


class ServiceServer(Waitable):
    def __init__(self, context: EntityHost, service: str) -> None:
        super().__init__()
        self.service = check_name(service, "service")
        self.gid = new_gid()
        self.received = 0
        self._requests: deque[Request] = deque()
        self._lock = threading.Lock()
        self.host = context
        context.register(self)

    def __repr__(self) -> str:
        return f"ServiceServer({self.service!r}, queued={len(self._requests)})"

    @property
    def queued(self) -> int:
        """Requests waiting to be taken."""
        return len(self._requests)

    def is_ready(self) -> bool:
        return bool(self._requests)

    def take_request(self) -> Request | None:
        try:
            request = self._requests.popleft()
        except IndexError:
            return None
        tracer = self.host.tracer
        if tracer.active:
            tracer.event(
                Kind.REQUEST_TAKEN,
                name=self.service,
                gid=self.gid,
                source_gid=request.client_gid,
                sequence_number=request.sequence_number,
                message_id=request.message_id,
            )
        return request

    def send_response(self, request: Request, body: str) -> str:
        """Answer `request`; return the response's Message-ID."""
        context = self.host
        context.check_open()
        timestamp = time.time_ns()
        address = context.address
        response = Email(
            subject=self.service,
            body=body,
            sender=address,
            headers={
                H.SOURCE_TIMESTAMP: str(timestamp),
                H.CLIENT_GID: request.client_gid,
                H.REQUEST_SEQUENCE_NUMBER: str(request.sequence_number),
                H.SERVER_GID: self.gid,
            },
            message_id=new_message_id(address),
        )
        context.sender.reply(request.email, response)
        tracer = context.tracer
        if tracer.active:
            trace_sent(
                tracer,
                Kind.RESPONSE_SENT,
                response,
                self.gid,
                request.sequence_number,
                timestamp,
                references=(*request.email.references, request.message_id)[-8:],
                in_reply_to=request.message_id,
            )
        return response.message_id

    def deliver(self, request: Request) -> bool:
        """Queue `request` for `take_request`."""
        with self._lock:
            self.received += 1
            self._requests.append(request)
        tracer = self.host.tracer
        if tracer.active:
            tracer.event(
                Kind.DELIVERED,
                name=self.service,
                gid=self.gid,
                source_gid=request.client_gid,
                sequence_number=request.sequence_number,
                message_id=request.message_id,
            )
        self.wake()
        return True

    def close(self) -> None:
        self.host.unregister(self)
