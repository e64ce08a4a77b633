"""The daemon's side of a mailbox's life cycle: idle boxes expire, full boxes drop their
oldest letters, and boxes are emptied or removed (by their holder or the administrator).

The rules themselves are the pure functions of `lifecycle`; this module applies them to
the daemon's boxes, on its event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from mailbus.postoffice import lifecycle
from mailbus.postoffice import store as st
from mailbus.postoffice.kinds import PostOfficeKind

if TYPE_CHECKING:
    from mailbus.postoffice.desk import HousekeepingDesk
    from mailbus.postoffice.mailbox import Box

log = logging.getLogger(__name__)


class Housekeeper:
    def __init__(self, desk: HousekeepingDesk) -> None:
        self.desk = desk
        self._timer: asyncio.TimerHandle | None = None
        self.expired = 0  # boxes removed for idleness since start
        self.dropped = 0  # letters dropped at the cap since start

    async def start(self) -> None:
        if self.desk.config.expire_idle_s > 0:
            self._schedule()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        interval = lifecycle.sweep_interval(self.desk.config.expire_idle_s)
        self._timer = asyncio.get_running_loop().call_later(interval, self._tick)

    def _tick(self) -> None:
        try:
            self.sweep()
        except Exception:  # a failed sweep must not end the sweeping
            log.exception("expiring idle mailboxes failed")
        self._schedule()

    # -- idle expiry ---------------------------------------------------------------------
    def sweep(self) -> list[str]:
        """Remove every box idle past `expire_idle_s` now (by the office's clock); their
        names. The removal commits with the next batch."""
        desk = self.desk
        now = desk.clock()
        limit = desk.config.expire_idle_s
        names = lifecycle.expired(
            ((box.name, box.idle_since) for box in desk.boxes.values()), now, limit
        )
        for name in names:
            box = desk.boxes[name]
            idle = lifecycle.idle_seconds(box.idle_since, now) or 0.0
            self._forget(box, f"expired: idle for {idle:.0f} s (limit {limit:.0f} s)")
            desk.submit(st.op_remove_box(box.box_id))
            self.expired += 1
        if names:
            log.info("expired %d idle mailboxes: %s", len(names), ", ".join(names[:10]))
        return names

    # -- the cap ---------------------------------------------------------------------------
    def make_room(self, box: Box) -> bool:
        """Room for one more letter in `box` (see `lifecycle.make_room`): drop its
        oldest letters if the policy says so; False if the letter must be refused."""
        config = self.desk.config
        holder = box.holder
        in_flight = bool(box.letters) and holder is not None and holder.in_flight == box.letters[0]
        room = lifecycle.make_room(
            len(box.letters), box.pending, config.max_letters_per_box, config.when_full, in_flight
        )
        if room.drop:
            self._drop_oldest(box, room.drop, keep_first=in_flight)
        return room.accept

    def _drop_oldest(self, box: Box, count: int, *, keep_first: bool) -> None:
        desk = self.desk
        first = box.letters.popleft() if keep_first else None
        dropped = [box.letters.popleft() for _ in range(count)]
        if first is not None:
            box.letters.appendleft(first)
        for letter_id in dropped:
            desk.uncache(letter_id)
        desk.submit(st.op_delete_letters(dropped))
        box.dropped += count
        self.dropped += count
        desk.trace(
            PostOfficeKind.LETTERS_DROPPED,
            name=box.name,
            detail=f"mailbox full ({desk.config.max_letters_per_box}): oldest dropped",
            extra={"count": count, "dropped": box.dropped},
        )

    # -- emptying and removing -------------------------------------------------------------
    async def empty(self, box: Box, by: str = "its holder") -> int:
        """Delete every letter of `box`; how many there were. Memory first, so that
        letters stored after the delete stay in both."""
        desk = self.desk
        count = len(box.letters)
        for letter_id in box.letters:
            desk.uncache(letter_id)
        box.letters.clear()
        await desk.write(st.op_empty_box(box.box_id))
        desk.trace(
            PostOfficeKind.BOX_EMPTIED, name=box.name, detail=f"by {by}", extra={"letters": count}
        )
        return count

    async def remove(self, box: Box, reason: str) -> bool:
        """Remove `box` and its letters; False if the store had no such box any more."""
        removed = await self.desk.write(st.op_remove_box(box.box_id))
        self._forget(box, reason)
        return bool(removed)

    def _forget(self, box: Box, reason: str) -> None:
        desk = self.desk
        count = len(box.letters)
        for letter_id in box.letters:
            desk.uncache(letter_id)
        desk.drop_box(box)
        desk.trace(
            PostOfficeKind.BOX_REMOVED, name=box.name, detail=reason, extra={"letters": count}
        )
