"""An open session's events as pages of a list, read without playing it: a page is
`PAGE_ROWS` events from a row number on (parts in order, which is time order for parts
written sorted), each with its offset from the session's start and a body preview.

Only the row groups holding the page are read, through the session's index, so a page
of a 100M-event session costs what a page of a small one does; `page_at` finds the page
holding a time (a seek) from the index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailbus.sessions.index import SessionIndex

PREVIEW_CHARS = 120
PAGE_ROWS = 100  # events in one page of the list: a screenful or five, drawn at once
_COLUMNS = ("recorded_ns", "source_ns", "kind", "detail", "name", "body_size", "body")


@dataclass(frozen=True, slots=True)
class SessionMessage:
    offset_s: float
    what: str  # kind, or kind/detail for a reception
    name: str
    size: int
    preview: str


@dataclass(frozen=True, slots=True)
class SessionPage:
    first_row: int  # the row number in the session of `rows[0]`
    rows: list[SessionMessage]
    total: int  # events in the session

    @property
    def last_row(self) -> int:
        """The row number after the page's last row."""
        return self.first_row + len(self.rows)


def page(
    index: SessionIndex, first_row: int, count: int = PAGE_ROWS, origin_ns: int | None = None
) -> SessionPage:
    """Events `first_row` on (at most `count`), clamped to the session, with offsets from
    `origin_ns` (default: the session's first event)."""
    from mailbus.sessions.pages import read_rows

    first_row = max(0, min(first_row, max(index.rows - count, 0)))
    frame = read_rows(index, first_row, count, _COLUMNS)
    start = (index.first_ns or 0) if origin_ns is None else origin_ns
    rows = []
    for r in frame.iter_rows(named=True):
        body = r["body"] or b""
        text = bytes(body[: PREVIEW_CHARS * 4]).decode("utf-8", errors="replace")
        what = r["kind"] if not r["detail"] else f"{r['kind']}/{r['detail']}"
        at = r["source_ns"] if r["source_ns"] is not None else r["recorded_ns"]
        rows.append(
            SessionMessage(
                ((at or start) - start) / 1e9,
                what,
                r["name"] or "",
                int(r["body_size"] or 0),
                text[:PREVIEW_CHARS].replace("\n", " "),
            )
        )
    return SessionPage(first_row, rows, index.rows)


def page_at(
    index: SessionIndex, t_ns: int, count: int = PAGE_ROWS, origin_ns: int | None = None
) -> SessionPage:
    """The page starting at the first event at or after time `t_ns` (the last page past
    the end)."""
    position = index.locate(t_ns)
    first = position.row_number if position is not None else index.rows - count
    return page(index, first, count, origin_ns)
