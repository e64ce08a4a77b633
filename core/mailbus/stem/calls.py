"""The cell behind `Hub.call`: each reply handed to the call waiting for it."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future

from mailbus.stem.message import StemMessage


class CallReplies:
    """The cell behind `Hub.call` (registered as CALLS_CELL on first use): hands each
    reply to the call waiting for it, by reply_id."""

    def __init__(self, counters: Counter[str]) -> None:
        self.pending: dict[int | str, Future[StemMessage]] = {}  # by msg_id: the first reply
        self._counters = counters

    def msg_in(self, message: StemMessage) -> None:
        slot = self.pending.get(message.reply_id) if message.reply_id is not None else None
        if message.type == "msg_ack":
            return  # an acknowledgement is not the reply a call waits for
        if slot is None:
            self._counters["late_replies"] += 1  # its call gave up (timed out)
        elif not slot.done():
            slot.set_result(message)
