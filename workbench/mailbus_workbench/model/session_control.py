"""What the Sessions view does with the sessions part, typed and in one place: start a
recorder, open a session with its index (built once, streaming, for a session recorded
without one), build a player (under the replay prefix by default) and draw the timeline
of an open session from its index. Opening an unindexed session may take as long as
reading it once: the view runs these calls in workers.

mailbus.sessions needs polars; it is imported when used, so the workbench runs (with
Sessions disabled) where it is not installed."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mailbus import headers as H

from mailbus_workbench.model.timeline import Timeline, timeline_from_index

if TYPE_CHECKING:
    from mailbus.context import Context
    from mailbus.sessions.index import SessionIndex
    from mailbus.sessions.player import Player
    from mailbus.sessions.reader import Session
    from mailbus.sessions.recorder import Recorder

MAX_RATE = 1000.0
DEFAULT_REPLAY_PREFIX = "replay/"  # replayed names never mix with live ones
REPLAY_MARK = "⟲ "  # before a replayed message or topic in the Topics view


def sessions_available() -> bool:
    """Whether the sessions part (mailbus.sessions and polars) is installed."""
    return importlib.util.find_spec("mailbus.sessions") is not None


def default_directory(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"sessions/run-{stamp}"


def start_recorder(directory: str, context: Context) -> Recorder:
    from mailbus.sessions.recorder import Recorder

    return Recorder(directory, context=context)


@dataclass(frozen=True, slots=True, repr=False)
class OpenedSession:
    session: Session
    index: SessionIndex

    def __repr__(self) -> str:
        # Textual names each worker by the repr of its arguments: the index's would be
        # every name's histogram (megabytes at 100M events), built on the UI thread.
        return f"OpenedSession({str(self.session.path)!r}, rows={self.rows})"

    @property
    def rows(self) -> int:
        """Events in the session."""
        return self.index.rows

    @property
    def size_bytes(self) -> int:
        return sum(part.bytes for part in self.index.parts)

    @property
    def duration_s(self) -> float:
        return self.index.duration_ns / 1e9

    @property
    def origin_ns(self) -> int:
        """The time of the first email a replay sends: offset 0 of the timeline, the
        player and the seek field."""
        from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC

        span = self.index.emails_range(n for n in self.index.names if n != PARTICIPANTS_TOPIC)
        return span[0] if span else (self.index.first_ns or 0)


def open_session(path: str, progress: Callable[[int, int], None] | None = None) -> OpenedSession:
    """Open `path` and its index (SessionError, OSError on a bad session). A session
    without an index gets one, built once in bounded memory; `progress(rows indexed,
    rows in all)` is called meanwhile."""
    from mailbus.sessions.index import load_index
    from mailbus.sessions.reader import open_session as open_path

    session = open_path(path)
    return OpenedSession(session, load_index(session, progress=progress))


class EarlyOpen:
    """`mailbus open PATH`: the session opened (its index loaded, the sessions part's
    imports made) on a thread started with the app, beside Textual's own start-up, so the
    view's open waits only for what is left of it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._progress = (0, 0)
        self._opened: OpenedSession | None = None
        self._error: Exception | None = None
        self._done = threading.Event()
        threading.Thread(target=self._run, name="mailbus-open-session", daemon=True).start()

    def _run(self) -> None:
        def progress(done: int, total: int) -> None:
            self._progress = (done, total)

        try:
            self._opened = open_session(self.path, progress)
        except Exception as exc:  # handed to the view's worker, which shows it
            self._error = exc
        finally:
            self._done.set()

    def result(
        self, progress: Callable[[int, int], None] | None = None, every_s: float = 0.25
    ) -> OpenedSession:
        """The opened session (or the open's exception), calling `progress` with how far
        an index being built has got meanwhile."""
        while not self._done.wait(every_s):
            if progress is not None and self._progress[1]:
                progress(*self._progress)
        if self._opened is None:
            raise self._error or RuntimeError(f"opening {self.path} ended without a session")
        return self._opened


def session_timeline(opened: OpenedSession) -> Timeline:
    """The timeline of what a replay of the session sends, with the player's offsets,
    drawn from the index (nothing of the parts is read)."""
    from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC

    return timeline_from_index(opened.index, skip=(PARTICIPANTS_TOPIC,))


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    rate: float = 1.0
    loop: bool = False
    prefix: str = DEFAULT_REPLAY_PREFIX  # "" replays under the recorded names


def build_player(opened: OpenedSession, context: Context, options: ReplayOptions) -> Player:
    """A player of the session into `context` (ValueError on bad options). It streams
    from the session's index: nothing is read before it starts."""
    from mailbus.sessions.player import Player

    return Player(
        opened.session,
        context,
        rate=options.rate,
        loop=options.loop,
        prefix=options.prefix,
        index=opened.index,
    )


def is_replayed(headers: Mapping[str, str]) -> bool:
    """Whether an email was sent by a player (it names the recorded email it replays)."""
    return any(name.lower() == H.REPLAY_OF.lower() for name in headers)
