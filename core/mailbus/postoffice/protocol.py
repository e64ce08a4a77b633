"""The PostOffice protocol's two state machines, sans-IO: `ServerProtocol` for the
daemon's clerk and `ClientProtocol` for a client binding.

What a frame means depends on where the conversation is (after CREATEBOX the client
sends a string, after REQDATA to SENDLETTER's recipient it sends binary), so decoding is
driven by the grammar (`grammar`). Both machines take bytes in any chunking with
`receive_data` and hand out frames with `next_event`; `send` checks that a frame may go
out now and returns its bytes. Nothing here touches a socket, a thread or a clock.

This module is also the protocol's public face: the wire format (`codec`) and the
grammar's names are re-exported here, so that a binding imports one module.
"""

from __future__ import annotations

from typing import NoReturn, cast

from mailbus.postoffice.codec import (
    DEFAULT_PORT,
    DIGEST_SIZE,
    IDENTIFIER,
    INT32_MAX,
    INT32_MIN,
    MAX_BINARY_BYTES,
    MAX_STRING_BYTES,
    NEED_DATA,
    PAUSED,
    ClientEvent,
    ClientFrame,
    Command,
    Decoder,
    Digest,
    EndOfStream,
    Field,
    InvalidName,
    LimitError,
    Limits,
    Mail,
    Name,
    OversizedPayload,
    Payload,
    ProtocolError,
    Reply,
    RequestCode,
    ResponseCode,
    ServerEvent,
    ServerFrame,
    Signal,
    StateError,
    Timeout,
    UnknownCommand,
    check_identifier,
    encode,
    encode_binary,
    encode_string,
)
from mailbus.postoffice.grammar import (
    ANYTIME,
    FRAME_OF,
    REFUSALS,
    SEQUENCES,
    Phase,
    Position,
    Step,
    after_code,
    after_data,
    after_reply,
    allowed_replies,
    expected_field,
    position_at,
)

# The protocol's public vocabulary: the machines, and the wire format and grammar they use.
__all__ = [
    "ANYTIME",
    "DEFAULT_PORT",
    "DIGEST_SIZE",
    "IDENTIFIER",
    "INT32_MAX",
    "INT32_MIN",
    "MAX_BINARY_BYTES",
    "MAX_STRING_BYTES",
    "NEED_DATA",
    "PAUSED",
    "REFUSALS",
    "SEQUENCES",
    "ClientEvent",
    "ClientFrame",
    "ClientProtocol",
    "Command",
    "Decoder",
    "Digest",
    "EndOfStream",
    "Field",
    "InvalidName",
    "LimitError",
    "Limits",
    "Mail",
    "Name",
    "OversizedPayload",
    "Payload",
    "Phase",
    "Position",
    "ProtocolError",
    "Reply",
    "RequestCode",
    "ResponseCode",
    "ServerEvent",
    "ServerFrame",
    "ServerProtocol",
    "Signal",
    "StateError",
    "Step",
    "Timeout",
    "UnknownCommand",
    "allowed_replies",
    "check_identifier",
    "encode",
    "encode_binary",
    "encode_string",
    "expected_field",
]

_CODE_BYTES = {code: bytes((code,)) for code in ResponseCode}
_COMMANDS = {request: Command(request) for request in RequestCode}
_RESPONSE_OF: dict[int, ResponseCode] = {int(code): code for code in ResponseCode}
# A client reading a letter that answers NEXTLETTER, and where it is once it has it.
_READING_SENDER = position_at(Phase.MAIL_SENDER, RequestCode.GETMAIL, 0, RequestCode.NEXTLETTER)
_READING_PAYLOAD = position_at(Phase.MAIL_PAYLOAD, RequestCode.GETMAIL, 0, RequestCode.NEXTLETTER)
_AFTER_LETTER = after_reply(
    position_at(Phase.MAIL_REPLY, RequestCode.GETMAIL, 0, RequestCode.NEXTLETTER),
    ResponseCode.INMAIL,
)


# -- server role ----------------------------------------------------------------------
class ServerProtocol:
    """The clerk's side: decodes what the client sends, checks what the clerk answers.

    After an event that needs an answer, `next_event` returns PAUSED until the clerk
    has `send`-ed a reply: only the reply tells what the client's next bytes mean.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self._decoder = Decoder(limits)
        self._pos = position_at(Phase.IDLE)
        self._eof = False
        self._error: ProtocolError | None = None  # what put the machine in ERROR

    @property
    def position(self) -> Position:
        return self._pos

    @property
    def mid_command(self) -> bool:
        """True inside an exchange (COMMTIMEOUT applies), False between requests."""
        return self._pos.phase not in (Phase.IDLE, Phase.CLOSED) or self._decoder.mid_field

    @property
    def closed(self) -> bool:
        return self._pos.phase is Phase.CLOSED

    @property
    def buffered(self) -> int:
        """Bytes received and not decoded yet."""
        return self._decoder.buffered

    def receive_data(self, data: bytes) -> None:
        """Add bytes from the client; b"" means it closed its side. ProtocolError (and
        the machine in ERROR) for more input than the limits allow or data after the
        end of the stream."""
        self._check_usable()
        if not data:
            self._eof = True
            return
        if self._eof:
            self._poison(ProtocolError("data received after the end of the stream"))
        try:
            self._decoder.feed(data)
        except ProtocolError as exc:
            self._poison(exc)

    def next_event(self) -> ServerEvent | Signal:
        pos = self._pos
        field = pos.expects
        if field is None:  # the clerk's turn to answer, or closed (or broken)
            self._check_usable()
            return PAUSED
        value = self._decoder.read(field)
        if value is NEED_DATA:
            if self._eof:
                mid = self.mid_command or self._decoder.buffered > 0
                self._pos = position_at(Phase.CLOSED)
                return EndOfStream(mid)
            return NEED_DATA
        if field is Field.CODE:
            code = cast(int, value)
            new = self._pos = after_code(pos, code)
            request = new.loop_request if new.phase is Phase.MAIL_REPLY else new.request
            return UnknownCommand(code) if request is None else _COMMANDS[request]
        self._pos = after_data(pos)
        return cast(ServerEvent, value)

    def send(self, frame: ServerFrame) -> bytes:
        """Bytes of the clerk's answer; StateError if it is not allowed now, which puts
        the machine in ERROR: the client waits for an answer that will not come."""
        response = ResponseCode.INMAIL if isinstance(frame, Mail) else frame.response
        try:
            self._pos = after_reply(self._pos, response)
        except StateError as exc:
            self._poison(exc)
        return encode(frame)

    def reply(self, response: ResponseCode) -> bytes:
        """`send(Reply(response))` without building the frame (the clerk's hot path)."""
        try:
            self._pos = after_reply(self._pos, response)
        except StateError as exc:
            self._poison(exc)
        return _CODE_BYTES[response]

    def _poison(self, error: ProtocolError) -> NoReturn:
        """Enter ERROR for good and raise `error`; once in ERROR, every call raises the
        same StateError, naming the first error."""
        self._check_usable()
        self._error = error
        self._pos = position_at(Phase.ERROR)
        raise error

    def _check_usable(self) -> None:
        if self._error is not None:
            raise StateError(f"the protocol is in ERROR since: {self._error}")


# -- client role ----------------------------------------------------------------------
class ClientProtocol:
    """The client's side. `send` may run ahead of the replies (pipelining): the frames
    are checked against the position the conversation will have if every step is
    answered REQDATA, and each reply is checked against the position it answers. A reply
    that ends a request while frames sent ahead are still unanswered is a StateError:
    the server would read those frames as new requests.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self._decoder = Decoder(limits)
        self._recv_pos = position_at(Phase.IDLE)  # what the next reply answers
        self._send_pos = position_at(Phase.IDLE)  # where the next frame goes, assuming REQDATA
        self._in_flight: list[Position] = []  # positions whose replies are pending
        self._eof = False
        self._mail_sender: str | None = None  # of the letter being read (MAIL_PAYLOAD)

    @property
    def closed(self) -> bool:
        return self._recv_pos.phase is Phase.CLOSED

    @property
    def idle(self) -> bool:
        return not self._in_flight and self._send_pos.phase is Phase.IDLE

    @property
    def position(self) -> Position:
        """What the server's next bytes answer (MAIL_SENDER / MAIL_PAYLOAD while a
        letter is being read), or where the conversation stands when nothing is due."""
        return self._in_flight[0] if self._in_flight else self._recv_pos

    @property
    def checked_in_loop(self) -> bool:
        return self._send_pos.phase is Phase.MAIL_LOOP

    def send(self, frame: ClientFrame) -> bytes:
        pos = self._send_pos
        if pos.phase is Phase.CLOSED:
            raise StateError("the connection is closed")
        field = pos.expects
        if field is None:  # waiting for a reply we cannot predict (end of request)
            raise StateError(f"cannot send {frame!r} before the reply to the last step")
        if isinstance(frame, Command):
            if field is not Field.CODE:
                raise StateError(f"{frame.request.name} sent where {field.value} is due")
            after = after_code(pos, frame.request)
        else:
            if field is Field.CODE or not isinstance(frame, FRAME_OF[field]):
                raise StateError(f"{type(frame).__name__} sent where {field.value} is due")
            after = after_data(pos)
        data = encode(frame)
        self._in_flight.append(after)
        self._send_pos = self._predict(after)
        return data

    @staticmethod
    def _predict(pos: Position) -> Position:
        """Where the conversation goes if the server answers REQDATA at `pos`, or a
        REPLY position (nothing more can be sent) when the answer ends the step."""
        if pos.phase is Phase.REPLY and ResponseCode.REQDATA in allowed_replies(
            pos.request, pos.step
        ):
            return after_reply(pos, ResponseCode.REQDATA)
        return pos

    def receive_data(self, data: bytes) -> None:
        """Add bytes from the server; b"" means it closed its side. ProtocolError for
        data after the end of the stream."""
        if not data:
            self._eof = True
            return
        if self._eof:
            raise ProtocolError("data received after the end of the stream")
        self._decoder.feed(data)

    def next_event(self) -> ClientEvent | Signal:
        if self._recv_pos.phase is Phase.CLOSED:
            return PAUSED
        if not self._in_flight:
            # Nothing asked: only SHUTDOWN (e.g. connection limit) may arrive unasked.
            if self._decoder.buffered:
                code = self._decoder.read(Field.CODE)
                assert isinstance(code, int)
                if code == ResponseCode.SHUTDOWN or code == ResponseCode.COMMTIMEOUT:
                    self._close()
                    return Reply(ResponseCode(code))
                raise StateError(f"the server sent code {code} unasked")
            if self._eof:
                self._close()
                return EndOfStream(False)
            return PAUSED
        pos = self._in_flight[0]
        if pos.phase is Phase.MAIL_SENDER:
            return self._read_mail_sender()
        if pos.phase is Phase.MAIL_PAYLOAD:
            return self._read_mail_payload()
        value = self._decoder.read(Field.CODE)
        if value is NEED_DATA:
            return self._need_data()
        assert isinstance(value, int)
        response = _RESPONSE_OF.get(value)
        if response is None:
            raise ProtocolError(f"unknown response code {value}")
        if response is not ResponseCode.INMAIL or pos.loop_request is not RequestCode.NEXTLETTER:
            return self._reply(pos, response)
        after_reply(pos, response)  # checks it is allowed
        self._in_flight[0] = _READING_SENDER
        return self._read_mail_sender()

    def _read_mail_sender(self) -> ClientEvent | Signal:
        value = self._decoder.read(Field.NAME)
        if value is NEED_DATA:
            return self._need_data()
        if isinstance(value, InvalidName):
            raise ProtocolError(f"letter with an invalid sender: {value.reason}")
        assert isinstance(value, Name)
        self._mail_sender = value.name
        self._in_flight[0] = _READING_PAYLOAD
        return self._read_mail_payload()

    def _read_mail_payload(self) -> ClientEvent | Signal:
        value = self._decoder.read(Field.PAYLOAD)
        if value is NEED_DATA:
            return self._need_data()
        if isinstance(value, OversizedPayload):
            raise LimitError(f"letter of {value.size} bytes is over this client's limit")
        assert isinstance(value, Payload) and self._mail_sender is not None
        mail = Mail(self._mail_sender, value.data)
        self._mail_sender = None
        self._in_flight.pop(0)
        self._recv_pos = _AFTER_LETTER
        if not self._in_flight:
            self._send_pos = self._recv_pos
        return mail

    def _need_data(self) -> ClientEvent | Signal:
        if self._eof:
            self._close()
            return EndOfStream(True)
        return NEED_DATA

    def _close(self) -> None:
        self._recv_pos = self._send_pos = position_at(Phase.CLOSED)
        self._in_flight.clear()

    def _reply(self, pos: Position, response: ResponseCode) -> Reply:
        after = after_reply(pos, response)
        self._in_flight.pop(0)
        self._recv_pos = after
        if after.phase is Phase.CLOSED:
            self._close()
        elif response is not ResponseCode.REQDATA and self._in_flight:
            self._close()
            raise StateError(
                f"{response.name} ended the request while {len(self._in_flight)} "
                "frame(s) sent ahead were unanswered; the connection is out of step"
            )
        elif not self._in_flight:
            self._send_pos = after
        return Reply(response)
