"""An open session's messages as a list, read without playing it: the first N messages
published or received, with their offset from the session's start and a body preview."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailbus.sessions.reader import Session

from mailbus.trace import Kind

PREVIEW_CHARS = 120
MESSAGE_KINDS = tuple(
    k.value for k in (Kind.PUBLISHED, Kind.RECEIVED, Kind.REQUEST_SENT, Kind.RESPONSE_SENT)
)


@dataclass(frozen=True, slots=True)
class SessionMessage:
    offset_s: float
    what: str  # kind, or kind/detail for a reception
    name: str
    size: int
    preview: str


@dataclass(frozen=True, slots=True)
class SessionMessages:
    rows: list[SessionMessage]
    total: int  # messages in the session


def first_messages(session: Session, limit: int) -> SessionMessages:
    """The first `limit` messages of `session` (a reader.Session) in recorded order."""
    import polars as pl

    frame = session.scan(with_session=False).filter(pl.col("kind").is_in(MESSAGE_KINDS))
    start = session.scan(with_session=False).select(pl.col("recorded_ns").min()).collect().item()
    total = frame.select(pl.len()).collect().item()
    head = (
        frame.sort("event_index")
        .head(limit)
        .select("recorded_ns", "kind", "detail", "name", "body_size", "body")
        .collect()
    )
    rows = []
    for r in head.iter_rows(named=True):
        body = r["body"] or b""
        text = bytes(body[: PREVIEW_CHARS * 4]).decode("utf-8", errors="replace")
        what = r["kind"] if not r["detail"] else f"{r['kind']}/{r['detail']}"
        rows.append(
            SessionMessage(
                ((r["recorded_ns"] or 0) - (start or 0)) / 1e9,
                what,
                r["name"] or "",
                int(r["body_size"] or 0),
                text[:PREVIEW_CHARS].replace("\n", " "),
            )
        )
    return SessionMessages(rows, int(total))
