"""A mailbox in the daemon's memory."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailbus.postoffice.clerk import Clerk


class Box:
    """A mailbox in memory: its id, password hash, the ids of its letters, its holder."""

    def __init__(
        self, box_id: int, name: str, secret: str, letters: list[int], idle_since: float = 0.0
    ) -> None:
        self.box_id = box_id
        self.name = name
        self.secret = secret
        self.letters: deque[int] = deque(letters)
        self.pending = 0  # letters accepted but not committed yet
        self.holder: Clerk | None = None
        self.removed = False
        self.known = b""  # Gatekeeper.memo of the digest last found right, or b""
        self.idle_since: float | None = idle_since  # None while checked out
        self.dropped = 0  # letters dropped at the cap (lifecycle.make_room)

    def mail_arrived(self) -> None:
        if self.holder is not None:
            self.holder.mail_arrived()
