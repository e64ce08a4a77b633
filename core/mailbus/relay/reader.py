"""The relay's IMAP reader: the adaptive ImapReceiver, plus `nudge()`.

A participant on the host that has just sent mail NUDGEs the relay: the reader leaves
IMAP IDLE at its next slice (`idle_slice_s`, 50 ms, against a participant's 250: one
reader per host can afford the wake-ups) and polls fast, as if the
server had announced new mail, instead of waiting for Dovecot's announcement (about
0.5 s after delivery). Mail from other hosts still comes by the announcement.
"""

from __future__ import annotations

import threading
from typing import Any

import imapclient

from mailbus.mail.imap_receiver import ImapReceiver
from mailbus.transport import Inbound


class RelayImapReceiver(ImapReceiver):
    idle_slice_s = 0.05

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._nudged = threading.Event()

    def nudge(self) -> None:
        """Poll now (from any thread): mail is on its way."""
        self._nudged.set()
        self.wake()

    def _step(self, client: imapclient.IMAPClient, now: float, deadline: float) -> list[Inbound]:
        if self._nudged.is_set():
            self._nudged.clear()
            self.counters["nudged"] += 1
            if self._idle_until is not None:
                self._end_idle(client)
            self._next_poll = 0.0
            self._fetch_due = True
            self.schedule.announced(now)
        return super()._step(client, now, deadline)
