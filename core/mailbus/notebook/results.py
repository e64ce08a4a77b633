"""What `Monitor.publish` and `Monitor.call` return: plain values that render as a small
HTML table in a notebook (and as text elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape


def _table(title: str, rows: list[tuple[str, str]]) -> str:
    cells = "".join(
        f"<tr><th style='text-align:left'>{escape(k)}</th><td><code>{escape(v)}</code></td></tr>"
        for k, v in rows
    )
    return f"<div class='mailbus-result'><b>{escape(title)}</b><table>{cells}</table></div>"


@dataclass(frozen=True)
class Published:
    topic: str
    body: str
    message_id: str

    def _repr_html_(self) -> str:
        return _table(
            f"published on {self.topic}",
            [("Message-ID", self.message_id), ("body", self.body)],
        )


@dataclass(frozen=True)
class CallResult:
    """A service call's outcome: the response body (None after a timeout), the latency
    and the email pair (request Message-ID, response In-Reply-To)."""

    service: str
    request: str
    response: str | None
    latency_ms: float
    request_id: str
    response_id: str
    in_reply_to: str
    status: str  # answered, timeout

    @property
    def ok(self) -> bool:
        return self.status == "answered"

    def _repr_html_(self) -> str:
        return _table(
            f"{self.service}: {self.status} in {self.latency_ms:.1f} ms",
            [
                ("request", self.request),
                ("response", self.response if self.response is not None else "(none)"),
                ("request Message-ID", self.request_id),
                ("response Message-ID", self.response_id),
                ("response In-Reply-To", self.in_reply_to),
            ],
        )
