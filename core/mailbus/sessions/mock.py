"""Answer live requests to a service with the responses a session recorded
(`mailbus replay --mock`)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import TYPE_CHECKING

from mailbus.envelope import EnvelopeKind
from mailbus.names import check_name
from mailbus.sessions.player import replay_events
from mailbus.sessions.reader import Session
from mailbus.sessions.replay_options import check_rate
from mailbus.waitset import wait_for_request

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)


class ServiceMock:
    """Answers live requests to `service` with the responses recorded for it.

    A request whose body was recorded gets the response recorded for that body (several
    recorded answers to one body are used in turn); any other request gets the recorded
    responses in their recorded order, starting again at the end. With `delay`, each
    answer waits the recorded round trip (scaled by 1/rate).
    """

    def __init__(
        self,
        session: Session | str,
        context: Context,
        service: str,
        *,
        recorded_service: str | None = None,
        delay: bool = False,
        rate: float = 1.0,
    ) -> None:
        check_name(service, "service")
        rate = check_rate(rate)
        self.context = context
        self.service = service
        self.delay = delay
        self.rate = rate
        pairs = recorded_pairs(session, recorded_service or service)
        if not pairs:
            raise ValueError(
                f"the session holds no answered request of service {recorded_service or service!r}"
            )
        self._in_order: deque[tuple[str, float]] = deque((r, d) for _, r, d, _ in pairs)
        self._by_body: dict[str, deque[tuple[str, float]]] = {}
        for request, response, rtt, request_cut in pairs:
            if not request_cut:
                self._by_body.setdefault(request, deque()).append((response, rtt))
        self.answered = 0
        self.by_body = 0
        self.in_order = 0
        self._stop = threading.Event()
        self._server = context.server(service)
        self._thread = threading.Thread(target=self._run, name="mailbus-mock", daemon=True)

    def start(self) -> ServiceMock:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self._server.close()

    def __enter__(self) -> ServiceMock:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_stopped(self, seconds: float) -> bool:
        """Wait `seconds` (capped: Event.wait overflows on huge ones); True if stopped."""
        return self._stop.wait(min(seconds, threading.TIMEOUT_MAX))

    def answer_for(self, body: str) -> tuple[str, float]:
        """The recorded response (and round trip in s) to give to a request `body`."""
        answers = self._by_body.get(body)
        if answers:
            self.by_body += 1
            answer = answers[0]
            answers.rotate(-1)
            return answer
        self.in_order += 1
        answer = self._in_order[0]
        self._in_order.rotate(-1)
        return answer

    def _run(self) -> None:
        while not self._stop.is_set():
            request = wait_for_request(self._server, 0.2)
            if request is None:
                continue
            body, rtt = self.answer_for(request.body)
            if self.delay and rtt > 0 and self._wait_stopped(rtt / self.rate):
                return
            try:
                self._server.send_response(request, body)
                self.answered += 1
            except Exception as exc:  # a closed context at shutdown, a transport error
                log.warning("mock of %s could not answer: %s", self.service, exc)


def recorded_pairs(session: Session | str, service: str) -> list[tuple[str, str, float, bool]]:
    """(request body, response body, round trip s, request body truncated) for each
    answered request of `service`, in the order the requests were sent."""
    events = replay_events(session, include=None)
    requests = {
        e.message_id: e for e in events if e.what == EnvelopeKind.REQUEST and e.name == service
    }
    pairs: list[tuple[int, str, str, float, bool]] = []
    seen: set[str] = set()
    for e in events:
        if (
            e.what != EnvelopeKind.RESPONSE
            or e.in_reply_to not in requests
            or e.in_reply_to in seen
        ):
            continue
        seen.add(e.in_reply_to)  # the first response to a request answers it
        request = requests[e.in_reply_to]
        rtt = max(e.offset_ns - request.offset_ns, 0) / 1e9
        pairs.append((request.offset_ns, request.body, e.body, rtt, request.truncated))
    pairs.sort(key=lambda p: p[0])
    return [(req, resp, rtt, cut) for _, req, resp, rtt, cut in pairs]
