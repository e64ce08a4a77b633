"""A clerk's GETMAIL round: letters handed out one at a time, each leaving its mailbox
only when the client asks for the next one (or says it is satiated), so that a crash
never loses a letter. A part of `Clerk`, kept apart because it is one concept with its
own state (the deadline, the letter in flight, the wait for mail)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mailbus.postoffice.kinds import PostOfficeKind
from mailbus.postoffice.protocol import Mail, Reply, RequestCode, ResponseCode

if TYPE_CHECKING:
    from mailbus.postoffice.desk import MailDesk
    from mailbus.postoffice.mailbox import Box


class GetMail:
    """The GETMAIL half of `Clerk` (a mixin: the clerk provides what is declared here)."""

    desk: MailDesk
    loop: asyncio.AbstractEventLoop
    box: Box | None
    _busy: bool
    _lost: bool

    def __init__(self) -> None:
        self._deadline = 0.0
        self._in_flight: int | None = None
        self._waiting_mail = False
        self._mail_timer: asyncio.TimerHandle | None = None

    def _send(self, frame: Reply | Mail) -> None:
        raise NotImplementedError

    def _reply(self, response: ResponseCode) -> None:
        raise NotImplementedError

    def _resume(self) -> None:
        raise NotImplementedError

    def _start_mail(self, milliseconds: int) -> None:
        box = self.box
        assert box is not None
        self.desk.getmail_served()
        wait = max(0, milliseconds) / 1000.0
        self._deadline = self.loop.time() + wait
        self._in_flight = None
        if not box.letters and wait == 0:
            self._reply(ResponseCode.MAILTIMEOUT)
        else:
            self._reply(ResponseCode.REQDATA)

    def _mail_loop(self, request: RequestCode) -> None:
        """NEXTLETTER or SATIATED inside GETMAIL. The client asking again (or being
        satiated) means it has the letter in flight whole: only now does that letter
        leave its mailbox. NEXTLETTER does not wait for that delete to commit (a crash
        before it means the letter comes again, never that it is lost); SATIATED does,
        and commits happen in order, so after its REQGRANTED every letter taken in that
        GETMAIL is gone for good."""
        desk = self.desk
        letter_id, self._in_flight = self._in_flight, None
        box = self.box
        if letter_id is not None and box is not None:
            if box.letters and box.letters[0] == letter_id:
                box.letters.popleft()
            if request is RequestCode.SATIATED:
                self._busy = True

                def deleted(_: Any, error: BaseException | None) -> None:
                    if not self._lost:
                        self._reply(ResponseCode.REQGRANTED)
                        self._resume()

                desk.take_letter(letter_id, deleted)
                return
            desk.take_letter(letter_id, None)
        if request is RequestCode.SATIATED:
            self._reply(ResponseCode.REQGRANTED)
            return
        if self._deliver():
            return
        remaining = self._deadline - self.loop.time()
        if remaining <= 0:
            self._reply(ResponseCode.MAILTIMEOUT)
            return
        self._busy = True
        self._waiting_mail = True
        # One timer per GETMAIL deadline, left armed when mail comes first (arming and
        # cancelling one per letter costs more than the letter).
        timer = self._mail_timer
        if timer is not None and timer.when() > self._deadline:
            timer.cancel()
            timer = None
        if timer is None:
            self._mail_timer = self.loop.call_at(self._deadline, self._mail_wait_over)

    def _deliver(self) -> bool:
        """Send the first letter of the box as INMAIL, if there is one."""
        box = self.box
        assert box is not None
        while box.letters:
            letter_id = box.letters[0]
            letter = self.desk.letter(letter_id)
            if letter is None:  # emptied meanwhile
                box.letters.popleft()
                continue
            self._in_flight = letter_id
            self._send(Mail(letter[0], letter[1]))
            if self.desk.tracing:
                self.desk.trace(
                    PostOfficeKind.LETTER_OUT,
                    name=box.name,
                    size=len(letter[1]),
                    extra={"sender": letter[0], "letter_id": letter_id},
                )
            return True
        return False

    def mail_arrived(self) -> None:
        """A letter was committed to our box (called by the sender's clerk)."""
        if self._waiting_mail and self._deliver():
            self._end_mail_wait()

    def _mail_wait_over(self) -> None:
        self._mail_timer = None
        if not self._waiting_mail:
            return
        if self.loop.time() < self._deadline:  # armed for an earlier GETMAIL
            self._mail_timer = self.loop.call_at(self._deadline, self._mail_wait_over)
            return
        if not self._deliver():
            self._reply(ResponseCode.MAILTIMEOUT)
        self._end_mail_wait()

    def _end_mail_wait(self) -> None:
        self._waiting_mail = False
        if not self._lost:
            self._resume()
