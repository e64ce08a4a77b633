"""A clerk serves one connection: it feeds the bytes to the sans-IO protocol and answers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from mailbus.postoffice.auth import Verdict
from mailbus.postoffice.getmail import GetMail
from mailbus.postoffice.kinds import PostOfficeKind
from mailbus.postoffice.mailbox import Box
from mailbus.postoffice.protocol import (
    NEED_DATA,
    PAUSED,
    Command,
    Digest,
    EndOfStream,
    InvalidName,
    Mail,
    Name,
    OversizedPayload,
    Payload,
    Phase,
    ProtocolError,
    Reply,
    RequestCode,
    ResponseCode,
    ServerProtocol,
    Timeout,
    UnknownCommand,
)
from mailbus.postoffice.store import StoreError

if TYPE_CHECKING:
    from mailbus.postoffice.desk import ClerkDesk

log = logging.getLogger(__name__)


class Clerk(GetMail, asyncio.Protocol):
    """Serves one connection, driven by callbacks: asyncio hands it bytes, it feeds them
    to `ServerProtocol` and answers each event at once. Only what must wait (a commit,
    mail during GETMAIL, a password check) leaves the clerk `busy`; input that arrives
    meanwhile stays buffered, and processing resumes when the wait is over. No task per
    connection and no future per message: that is what keeps the daemon's cost per
    letter low."""

    desk: ClerkDesk  # the office, seen through what a clerk needs

    def __init__(self, desk: ClerkDesk) -> None:
        self.desk = desk
        self.config = desk.config
        self.loop = asyncio.get_running_loop()
        self.proto = ServerProtocol(desk.limits)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.host = "?"  # the peer's address without the port: back-off is per host
        self.box: Box | None = None
        self._digest = b""
        self._created = 0
        self._out = bytearray()
        self._lost = False
        self._busy = False  # waiting for a commit, mail or a password check
        self._closing = False
        self._write_paused = False
        self._read_paused = False
        self._pause_above = desk.limits.max_buffer_bytes // 2
        self._clock = 0.0  # when the client last sent, or we last answered
        self._timer: asyncio.TimerHandle | None = None
        # Per-request scratch: the name (or why it was refused).
        self._name: str | None = None
        self._name_error = ""
        GetMail.__init__(self)

    @property
    def in_flight(self) -> int | None:
        """The id of the letter this clerk has sent in GETMAIL and not seen taken yet."""
        return self._in_flight

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if self.config.plain_refused(self.host):
            # Answered once, then closed: the client says why (Unsupported).
            log.warning("%s: plain connection from another host refused (use TLS)", self.peer)
            self.transport.write(bytes((ResponseCode.UNSUPPORTED,)))
            transport.close()
            self._lost = True
            return
        if not self.desk.admit(self):
            self.transport.write(bytes((ResponseCode.SHUTDOWN,)))
            transport.close()
            self._lost = True
            return
        self._clock = self.loop.time()
        self._timer = self.loop.call_later(self.config.comm_timeout_s, self._check_stall)

    def data_received(self, data: bytes) -> None:
        if self._lost:
            return
        self._clock = self.loop.time()
        try:
            self.proto.receive_data(data)
        except ProtocolError as exc:
            log.info("%s: %s; closing", self.peer, exc)
            self._close()
            return
        if self.proto.buffered > self._pause_above and self.transport is not None:
            self.transport.pause_reading()
            self._read_paused = True
        self._process()

    def eof_received(self) -> bool:
        try:
            self.proto.receive_data(b"")
        except ProtocolError:  # broken already, and closing
            return False
        self._process()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        for timer in (self._timer, self._mail_timer):
            if timer is not None:
                timer.cancel()
        self._waiting_mail = False
        self._release("connection closed")
        self.desk.dismiss(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._clock = self.loop.time()
        self._process()

    # -- plumbing ----------------------------------------------------------------------
    def _send(self, frame: Reply | Mail) -> None:
        try:
            self._out += self.proto.send(frame)
        except ProtocolError as exc:
            self._broken(exc)

    def _reply(self, response: ResponseCode) -> None:
        try:
            self._out += self.proto.reply(response)
        except ProtocolError as exc:
            self._broken(exc)

    def _broken(self, exc: ProtocolError) -> None:
        """An answer the protocol refused (a bug here, not the client's): the machine
        is in ERROR, so the connection cannot go on. Never raised into the caller, which
        may be another clerk's commit or a timer."""
        if not self._closing:
            log.error("%s: %s; closing", self.peer, exc)
        self._close()

    def _flush(self) -> None:
        if self._out and self.transport is not None and not self._lost:
            self.transport.write(bytes(self._out))
        self._out.clear()

    def _close(self) -> None:
        self._flush()
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def shutdown(self) -> None:
        """The daemon is stopping: say SHUTDOWN and close."""
        if self.transport is not None and not self._lost:
            self.transport.write(bytes(self._out) + bytes((ResponseCode.SHUTDOWN,)))
            self._out.clear()
            self.transport.close()
        self._closing = True

    def _check_stall(self) -> None:
        """COMMTIMEOUT for a client silent too long inside a command. One timer per
        connection, re-armed when it fires, so that a message costs no timer work."""
        self._timer = None
        if self._lost or self._closing:
            return
        limit = self.config.comm_timeout_s
        now = self.loop.time()
        waiting_on_us = self._busy or self._write_paused  # a slow reader is not a stall
        if self.proto.mid_command and not waiting_on_us and now - self._clock >= limit:
            self.desk.trace(
                PostOfficeKind.TIMEOUT,
                name=self.box.name if self.box else "",
                detail=f"no data from {self.peer} within {limit} s",
                extra={"peer": self.peer, "phase": self.proto.position.phase.value},
            )
            self._reply(ResponseCode.COMMTIMEOUT)
            self._close()
            return
        wait = limit - (now - self._clock) if self.proto.mid_command else limit
        self._timer = self.loop.call_later(max(wait, 0.01), self._check_stall)

    def _resume(self) -> None:
        """An asynchronous step answered: go on with what the client sent meanwhile."""
        self._busy = False
        self._clock = self.loop.time()
        self._process()

    def _start(self, coro: Any) -> None:
        """Run a rare, slow step (password check, box creation) as a task."""
        self._busy = True

        async def run() -> None:
            try:
                await coro
            except StoreError as exc:
                # The store failed (a full or read-only disk): said in one line, not a
                # traceback per attempt. EMPTYBOX and REMOVEBOX have no answer for it.
                log.error("%s: %s; closing the connection", self.peer, exc)
                self._close()
                return
            except Exception:
                log.exception("clerk for %s failed", self.peer)
                self._close()
                return
            self._resume()

        self.desk.spawn(run())

    # -- the clerk's loop ----------------------------------------------------------------
    def _process(self) -> None:
        proto = self.proto
        while not (self._busy or self._lost or self._closing or self._write_paused):
            try:
                event = proto.next_event()
            except ProtocolError as exc:
                log.info("%s: %s; closing", self.peer, exc)
                self._close()
                break
            if event is NEED_DATA:
                if self._read_paused and self.transport is not None:
                    self._read_paused = False
                    self.transport.resume_reading()
                break
            if event is PAUSED or isinstance(event, EndOfStream):
                self._close()  # closed after DISCONNECT, or the client went away
                break
            try:
                self._handle(event)
            except ProtocolError as exc:  # LimitError, or any other the protocol raised
                log.info("%s: %s; closing", self.peer, exc)
                self._close()
                break
            if proto.closed:
                self._close()
                break
        # While a step waits (a commit, mail), the REQDATA answers already buffered are
        # for steps whose data has arrived: the client sent ahead and waits for them all,
        # so they go out together with the final answer, in one write.
        if not self._busy:
            self._flush()

    def _handle(self, event: object) -> None:
        # One dictionary look-up instead of a chain of isinstance tests per event.
        _HANDLERS[type(event)](self, event)

    def _on_unknown(self, event: UnknownCommand) -> None:
        self._reply(ResponseCode.BADCOMMAND)

    def _on_command(self, event: Command) -> None:
        if self.proto.position.phase is Phase.MAIL_REPLY:
            self._mail_loop(event.request)
        else:
            self._command(event.request)

    def _on_name(self, event: Name) -> None:
        self._name = event.name
        self._name_error = ""
        self._reply(ResponseCode.REQDATA)

    def _on_invalid_name(self, event: InvalidName) -> None:
        self._name = None
        self._name_error = event.reason
        self._reply(ResponseCode.REQDATA)

    def _on_digest(self, event: Digest) -> None:
        if self.proto.position.request is RequestCode.CREATEBOX:
            self._start(self._create_box(event.digest))
        else:
            self._start(self._check_out(event.digest))

    def _on_timeout(self, event: Timeout) -> None:
        self._start_mail(event.milliseconds)

    def _command(self, request: RequestCode) -> None:
        box = self.box
        needs_box = (
            RequestCode.RETBOX,
            RequestCode.REMOVEBOX,
            RequestCode.SENDLETTER,
            RequestCode.GETMAIL,
            RequestCode.EMPTYBOX,
        )
        if request in needs_box and box is None:
            self._reply(ResponseCode.NOBOXCONN)
        elif request in (RequestCode.CREATEBOX, RequestCode.SENDLETTER, RequestCode.GETMAIL):
            self._reply(ResponseCode.REQDATA)
        elif request is RequestCode.REQBOX:
            self._reply(ResponseCode.ALREADYCONN if box is not None else ResponseCode.REQDATA)
        elif request is RequestCode.RETBOX:
            self._release("returned")
            self._reply(ResponseCode.REQGRANTED)
        elif request is RequestCode.REMOVEBOX:
            self._start(self._remove_box())
        elif request is RequestCode.EMPTYBOX:
            assert box is not None
            self._start(self._empty_box(box))
        elif request is RequestCode.DISCONNECT:
            self._release("disconnect")
            self._reply(ResponseCode.REQGRANTED)
        else:  # NEXTLETTER / SATIATED outside GETMAIL
            self._reply(ResponseCode.BADCOMMAND)

    # -- mailboxes -----------------------------------------------------------------------
    async def _create_box(self, digest: bytes) -> None:
        # Every refusal is BOXEXISTS, the only one ERRATA allows after CREATEBOX; the
        # log and the trace say why.
        name, desk = self._name, self.desk
        if name is None:
            desk.refuse_box("", f"invalid name: {self._name_error}", self.peer)
            self._reply(ResponseCode.BOXEXISTS)
            return
        allowed = self._created < self.config.max_boxes_per_connection
        if await desk.create_box(name, digest, self.peer, allowed):
            self._created += 1
            self._reply(ResponseCode.REQGRANTED)
        else:
            self._reply(ResponseCode.BOXEXISTS)

    async def _check_out(self, digest: bytes) -> None:
        desk, name = self.desk, self._name
        box = desk.box(name) if name is not None else None
        if box is None:
            self._reply(ResponseCode.NONEXISTBOX)
            return
        if not await self._verify(box, digest):
            return  # answered NOAUTH
        if box.removed or desk.box(box.name) is not box:
            self._reply(ResponseCode.NONEXISTBOX)
        elif box.holder is not None or self._lost:
            self._reply(ResponseCode.BOXINUSE)
        else:
            box.holder = self
            box.idle_since = None
            self.box = box
            self._digest = digest
            desk.trace(PostOfficeKind.CHECKED_OUT, name=box.name, extra={"peer": self.peer})
            self._reply(ResponseCode.REQGRANTED)

    async def _verify(self, box: Box, digest: bytes) -> bool:
        """Check a password (see `Gatekeeper.verify`); a refusal is answered here."""
        verdict = await self.desk.verify(box, digest, self.host, self.peer, lambda: self._lost)
        if verdict is Verdict.GRANTED:
            return True
        if verdict is not Verdict.GONE:
            self._reply(ResponseCode.NOAUTH)
        if verdict is Verdict.CLOSE:
            self._close()
        return False

    def _release(self, reason: str) -> None:
        box = self.box
        if box is None:
            return
        self.box = None
        self._digest = b""
        self._in_flight = None
        if box.holder is self:
            box.holder = None
            box.idle_since = self.desk.clock()
            self.desk.trace(PostOfficeKind.RETURNED, name=box.name, detail=reason)

    async def _remove_box(self) -> None:
        box, desk = self.box, self.desk
        assert box is not None
        if box.removed or desk.box(box.name) is not box:
            self._release("removed")
            self._reply(ResponseCode.NONEXISTBOX)
            return
        # Only the box this connection checked out, and only with its password.
        if not await self._verify(box, self._digest):
            return  # answered NOAUTH
        removed = await desk.remove_box(box, "removed by its holder")
        self._release("removed")
        self._reply(ResponseCode.REQGRANTED if removed else ResponseCode.NONEXISTBOX)

    async def _empty_box(self, box: Box) -> None:
        await self.desk.empty_box(box)
        self._in_flight = None
        self._reply(ResponseCode.REQGRANTED)

    # -- letters -------------------------------------------------------------------------
    def _send_letter(self, event: Payload | OversizedPayload) -> None:
        desk, sender, config = self.desk, self.box, self.config
        assert sender is not None
        name, reason = self._name, ""
        targets: list[Box] = []
        if isinstance(event, OversizedPayload):
            reason = f"letter of {event.size} bytes is over {config.max_letter_bytes}"
        elif name is None:
            reason = f"invalid recipient: {self._name_error}"
        else:
            targets, reason = desk.route_letter(name, sender.name)
        if reason or not isinstance(event, Payload):
            log.debug("%s: DELFAIL: %s", self.peer, reason)
            self._reply(ResponseCode.DELFAIL)
            return
        for box in targets:
            box.pending += 1
        data = event.data

        def stored(letter_ids: Any, error: BaseException | None) -> None:
            for box in targets:
                box.pending -= 1
            delivered = 0
            for box, letter_id in zip(targets, letter_ids or [None] * len(targets), strict=True):
                if letter_id is None or box.removed:
                    continue
                delivered += 1
                desk.letter_stored(box, letter_id, sender.name, data, name)
            if self._lost:
                return
            # `error` with ids: committed, but the fsync that was to make it durable
            # failed ("full" mode): not granted. It stays stored and is delivered, so
            # a sender that tries again makes a duplicate, never a loss.
            granted = delivered and error is None
            self._reply(ResponseCode.REQGRANTED if granted else ResponseCode.DELFAIL)
            self._resume()

        self._busy = True
        desk.store_letter(targets, sender.name, data, stored)


_HANDLERS: dict[type, Callable[[Clerk, Any], None]] = {
    UnknownCommand: Clerk._on_unknown,
    Command: Clerk._on_command,
    Name: Clerk._on_name,
    InvalidName: Clerk._on_invalid_name,
    Digest: Clerk._on_digest,
    Payload: Clerk._send_letter,
    OversizedPayload: Clerk._send_letter,
    Timeout: Clerk._on_timeout,
}
