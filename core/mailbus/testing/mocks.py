"""Strict service mocks: `mock_service(name, from_session=..., match=...)` answers a
service on the test's bus with recorded responses (or a function) and, when the test
ends, fails on a call it could not answer and on recorded calls never made
(`strict=False` keeps only the first check).

Matching a request to a recorded one: `match="body"` (the default: the same body, JSON
compared field by field with float tolerance), `match="order"` (the recorded responses
in their order, whatever the request), or a function `(request_body, recorded_body) ->
bool`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mailbus.service import ServiceServer
from mailbus.testing.buses import Bus
from mailbus.testing.matching import same
from mailbus.waitset import wait_for_request

log = logging.getLogger(__name__)

Responder = Callable[[str], str | None]
Matcher = Callable[[str, str], bool]


@dataclass(slots=True)
class RecordedCall:
    request: str
    response: str
    used: int = 0


def same_body(got: str, recorded: str) -> bool:
    """Equal bodies; JSON bodies equal field by field (numbers within tolerance)."""
    if got == recorded:
        return True
    try:
        return same(json.loads(got), json.loads(recorded))
    except ValueError:
        return False


class MockService:
    def __init__(
        self,
        bus: Bus,
        name: str,
        *,
        from_session: str | Path | None = None,
        responses: Responder | Mapping[str, str] | None = None,
        match: str | Matcher = "body",
        strict: bool = True,
        recorded_service: str | None = None,
    ) -> None:
        if (from_session is None) == (responses is None):
            raise ValueError("mock_service needs exactly one of from_session= and responses=")
        if isinstance(match, str) and match not in ("body", "order"):
            raise ValueError(f"match is 'body', 'order' or a function, not {match!r}")
        self.name = name
        self.strict = strict
        self.match = match
        self.recorded: list[RecordedCall] = []
        self.responder: Responder | None = None
        if from_session is not None:
            # Sessions need polars: imported only by a test that mocks from one.
            from mailbus.sessions.mock import recorded_pairs

            pairs = recorded_pairs(str(from_session), recorded_service or name)
            if not pairs:
                raise ValueError(
                    f"session {str(from_session)!r} holds no answered request of "
                    f"service {recorded_service or name!r}"
                )
            self.recorded = [RecordedCall(req, resp) for req, resp, _, _ in pairs]
        elif isinstance(responses, Mapping):
            self.recorded = [RecordedCall(k, v) for k, v in responses.items()]
        else:
            self.responder = responses
        self.calls: list[tuple[str, str | None]] = []  # (request, response or None)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ServiceServer = bus.server(name)
        self._thread = threading.Thread(target=self._run, name=f"mock {name}", daemon=True)
        self._thread.start()

    def answer_for(self, body: str) -> str | None:
        if self.responder is not None:
            return self.responder(body)
        with self._lock:
            if self.match == "order":
                for call in self.recorded:
                    if not call.used:
                        call.used += 1
                        return call.response
                return None
            test = same_body if self.match == "body" else self.match
            candidates = [c for c in self.recorded if test(body, c.request)]  # type: ignore[operator]
            if not candidates:
                return None
            # The least used first: repeated identical calls take the recorded answers in turn.
            call = min(candidates, key=lambda c: c.used)
            call.used += 1
            return call.response

    def _run(self) -> None:
        while not self._stop.is_set():
            request = wait_for_request(self._server, 0.1)
            if request is None:
                continue
            answer = self.answer_for(request.body)
            with self._lock:
                self.calls.append((request.body, answer))
            if answer is None:
                continue  # the caller times out; the test fails at its end
            try:
                self._server.send_response(request, answer)
            except Exception as exc:  # the bus closing under a late call
                log.warning("mock of %s could not answer: %s", self.name, exc)

    def problems(self) -> list[str]:
        with self._lock:
            unanswered = [body for body, answer in self.calls if answer is None]
            unused = [c for c in self.recorded if not c.used] if self.strict else []
        found = []
        if unanswered:
            lines = [f"mock_service({self.name!r}) could not answer {len(unanswered)} call(s):"]
            lines += [f"  request {body!r}" for body in unanswered[:10]]
            if self.recorded:
                lines.append("  recorded requests it knows:")
                lines += [f"    {c.request!r}" for c in self.recorded[:10]]
            found.append("\n".join(lines))
        if unused:
            lines = [
                f"mock_service({self.name!r}): {len(unused)} recorded call(s) never made "
                "(strict=False allows it):"
            ]
            lines += [f"  request {c.request!r} -> {c.response!r}" for c in unused[:10]]
            found.append("\n".join(lines))
        return found

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._server.close()
