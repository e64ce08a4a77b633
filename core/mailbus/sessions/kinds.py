"""Event kinds of recording and replay (docs/sessions.md)."""

from __future__ import annotations

from mailbus.event_kind import EventKind


class SessionKind(EventKind):
    RECORDER_DROPPED = (
        "recorder.dropped",
        "the recorder's bounded queue was full: counted, never silent | extra",
    )
    REPLAY_SENT = (
        "replay.sent",
        "the player sent a recorded message again | name, body, raw (the recorded bytes)",
    )
    REPLAY_ERROR = ("replay.error", "the player could not send a recorded message | detail")
