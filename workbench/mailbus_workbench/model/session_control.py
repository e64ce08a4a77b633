"""What the Sessions view does with the sessions part, typed and in one place: start a
recorder, open a session, build a player (under the replay prefix by default) and read the
timeline of an open session. Each call may take seconds: the view runs them in workers.

mailbus.sessions needs polars; it is imported when used, so the workbench runs (with
Sessions disabled) where it is not installed."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mailbus import headers as H

from mailbus_workbench.model.timeline import Timeline, build_timeline

if TYPE_CHECKING:
    from mailbus.context import Context
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


@dataclass(frozen=True, slots=True)
class OpenedSession:
    session: Session
    rows: int  # events in the session


def open_session(path: str) -> OpenedSession:
    """Open `path` (SessionError, OSError on a bad session)."""
    from mailbus.sessions.reader import open_session as open_path

    session = open_path(path)
    return OpenedSession(session, session.rows)  # rows: reads each part's footer


def session_timeline(session: Session) -> Timeline:
    """The timeline of what a replay of `session` sends, with the player's offsets."""
    from mailbus.sessions.player import replay_events

    return build_timeline((e.name, e.offset_ns) for e in replay_events(session))


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    rate: float = 1.0
    loop: bool = False
    prefix: str = DEFAULT_REPLAY_PREFIX  # "" replays under the recorded names


def build_player(session: Session, context: Context, options: ReplayOptions) -> Player:
    """A player of `session` into `context` (ValueError on bad options)."""
    from mailbus.sessions.player import Player

    return Player(session, context, rate=options.rate, loop=options.loop, prefix=options.prefix)


def is_replayed(headers: Mapping[str, str]) -> bool:
    """Whether an email was sent by a player (it names the recorded email it replays)."""
    return any(name.lower() == H.REPLAY_OF.lower() for name in headers)
