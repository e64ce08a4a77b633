"""The relay's IMAP reader: the adaptive ImapReceiver, plus `nudge()`.

A participant on the host that has just sent mail NUDGEs the relay: the reader leaves
IMAP IDLE at once and polls fast, as if the server had announced new mail, instead of
waiting for Dovecot's announcement (about 0.5 s after delivery). Mail from other hosts
still comes by the announcement. In IDLE the reader sleeps in one select() on the IMAP
socket and a wake-up pipe, not in the participant receiver's quarter-second slices: an
idle relay costs nothing, and a nudge or wake() is seen at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from typing import Any

import imapclient

from mailbus.mail.imap_receiver import ImapReceiver

# After the server spoke during IDLE, the parent's slice reads what it said (at once)
# and tells an end of stream apart from news.
_READ_SLICE_S = 0.05


class RelayImapReceiver(ImapReceiver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._nudged = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def nudge(self) -> None:
        """Poll now (from any thread): mail is on its way."""
        self._nudged.set()
        self.wake()

    def wake(self) -> None:
        super().wake()
        with contextlib.suppress(OSError):  # a full pipe is already a wake-up
            os.write(self._wake_w, b"x")

    def before_step(self, client: imapclient.IMAPClient, now: float) -> None:
        if self._nudged.is_set():
            self._nudged.clear()
            self.counters["nudged"] += 1
            self.leave_idle(client)
            self.poll_now(fetch=True)
            self.schedule.announced(now)

    def idle_wait(self, client: imapclient.IMAPClient, until: float) -> bool:
        sock = client.socket()
        while not self.woken:
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            readable, _, _ = select.select([sock, self._wake_r], [], [], remaining)
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 4096):
                        pass
                continue  # `_woken` says whether to stop
            if readable and super().idle_wait(client, time.monotonic() + _READ_SLICE_S):
                return True
        return False

    def close(self) -> None:
        super().close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
