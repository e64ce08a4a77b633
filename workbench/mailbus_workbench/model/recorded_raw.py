"""The recorded bytes of replayed messages: a replay re-sends a session's emails, and on
the in-process transport no bytes travel, so the Raw tab and `.eml` export of a replayed
message show the bytes its original arrived with when the session was recorded (the
player's `replay.sent` events carry them; the Raw tab says so)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from mailbus.sessions.kinds import SessionKind
from mailbus.trace import TraceEvent

from mailbus_workbench.model.topics import MessageRecord

REPLAY_SENT = SessionKind.REPLAY_SENT.value
# The newest replayed messages' recorded bytes are kept, at most this many messages and
# this many bytes in all (each is at most feed.RAW_KEEP bytes): older ones show rebuilt.
MAX_KEPT = 10_000
MAX_BYTES = 32 * 1024 * 1024
RECORDED_AS = "raw_recorded_as"  # extra key: the original's Message-ID


class RecordedRaw:
    def __init__(self, max_kept: int = MAX_KEPT, max_bytes: int = MAX_BYTES) -> None:
        self.max_kept = max_kept
        self.max_bytes = max_bytes
        self.bytes = 0
        self._raw: OrderedDict[str, tuple[bytes, str]] = OrderedDict()

    def add(self, event: TraceEvent) -> None:
        """Remember the recorded bytes a `replay.sent` event carries (none: nothing)."""
        if event.raw is None or not event.message_id:
            return
        original = event.extra.get("original") if event.extra else None
        kept = self._raw
        old = kept.pop(event.message_id, None)
        if old is not None:
            self.bytes -= len(old[0])
        kept[event.message_id] = (event.raw, str(original or ""))
        self.bytes += len(event.raw)
        while kept and (len(kept) > self.max_kept or self.bytes > self.max_bytes):
            raw, _ = kept.popitem(last=False)[1]
            self.bytes -= len(raw)

    def resolve(self, record: MessageRecord) -> MessageRecord:
        """`record` with the recorded bytes of its original when it is a replayed
        message that arrived without bytes of its own; else `record` itself."""
        event = record.event
        if event.raw is not None:
            return record
        kept = self._raw.get(event.message_id)
        if kept is None:
            return record
        raw, original = kept
        extra = {**event.extra, RECORDED_AS: original}
        return MessageRecord(record.number, replace(event, raw=raw, extra=extra))

    def clear(self) -> None:
        self._raw.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._raw)
