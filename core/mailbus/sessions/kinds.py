"""Event kinds of recording and replay (docs/sessions.md)."""

from __future__ import annotations

from mailbus.event_kind import EventKind, Extra


class SessionKind(EventKind):
    RECORDER_DROPPED = (
        "recorder.dropped",
        "the recorder's bounded queue was full: counted, never silent | detail",
        {
            "dropped": Extra(int, "events lost since the last such row"),
            "max_queued": Extra(int, "the queue's bound"),
        },
    )
    REPLAY_SENT = (
        "replay.sent",
        "the player sent a recorded message again | name, message_id, source_timestamp_ns, "
        "size, raw (the recorded bytes)",
        {
            "original": Extra(str, "the recorded Message-ID"),
            "offset_ns": Extra(int, "its time in the recording"),
        },
    )
    REPLAY_ERROR = ("replay.error", "the player could not send a recorded message | detail")
