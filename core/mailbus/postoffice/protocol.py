"""The PostOffice wire protocol, sans-IO: codes, frames, codec and per-role state machines.

Every code is one byte (values from ERRATA.md, not the typos of the protocol document).
A string is a 2-byte big-endian byte length then strict UTF-8, binary a 4-byte big-endian
length then the bytes, a password the 16 raw bytes of an MD5 digest, a timeout a signed
4-byte big-endian count of milliseconds.

What a frame means depends on where the conversation is (after CREATEBOX the client
sends a string, after REQDATA to SENDLETTER's recipient it sends binary), so decoding is
driven by the state machines: `ServerProtocol` for the daemon's clerk and
`ClientProtocol` for a client binding. Both take bytes in any chunking with
`receive_data` and hand out frames with `next_event`; `send` checks that a frame may go
out now and returns its bytes. Nothing here touches a socket, a thread or a clock.

Limits are checked on the length prefix, before any buffer is allocated: a string or a
payload over its limit is skipped byte by byte (the stream stays in step) and reported
as an `InvalidName` / `OversizedPayload` event, which the clerk refuses with a code.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from enum import Enum, IntEnum
from typing import cast

DEFAULT_PORT = 8228
DIGEST_SIZE = 16
IDENTIFIER = re.compile(r"(?:[a-zA-Z0-9]+\.)*[a-zA-Z0-9]+")
MAX_STRING_BYTES = 0xFFFF  # what the 2-byte prefix can say
MAX_BINARY_BYTES = 0xFFFFFFFF
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Request(IntEnum):
    """Client to server codes."""

    REQBOX = 0
    RETBOX = 1
    CREATEBOX = 2
    REMOVEBOX = 3
    SENDLETTER = 4
    GETMAIL = 5
    NEXTLETTER = 6
    SATIATED = 7
    EMPTYBOX = 8
    DISCONNECT = 9


class Response(IntEnum):
    """Server to client codes."""

    REQGRANTED = 0
    REQDATA = 1
    NOAUTH = 2
    BADCOMMAND = 3
    ALREADYCONN = 4
    MAILTIMEOUT = 5
    BOXEXISTS = 6
    NONEXISTBOX = 7
    NOBOXCONN = 8
    BOXINUSE = 9
    DELFAIL = 10
    SHUTDOWN = 11
    COMMTIMEOUT = 12
    INMAIL = 13
    UNSUPPORTED = 14


class ProtocolError(Exception):
    """Bytes or frames that break the protocol; the connection cannot continue."""


class LimitError(ProtocolError):
    """More buffered data than the configured limit allows."""


class StateError(ProtocolError):
    """A frame sent or received where the conversation does not allow it."""


# -- frames ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Command:
    """A request code (client to server)."""

    request: Request


@dataclass(frozen=True, slots=True)
class UnknownCommand:
    """A code byte that names no request (decoded by the server, answered BADCOMMAND)."""

    code: int


@dataclass(frozen=True, slots=True)
class Name:
    """A mailbox identifier, sent as a string (S)."""

    name: str


@dataclass(frozen=True, slots=True)
class Digest:
    """The 16-byte MD5 digest of a password."""

    digest: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.digest, bytes) or len(self.digest) != DIGEST_SIZE:
            raise ValueError(f"a password digest is {DIGEST_SIZE} bytes")

    def __repr__(self) -> str:  # never show secrets in logs or tracebacks
        return "Digest(<16 bytes>)"


@dataclass(frozen=True, slots=True)
class Payload:
    """A letter's content, sent as binary (B)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Timeout:
    """GETMAIL's wait in milliseconds (signed 32-bit)."""

    milliseconds: int


@dataclass(frozen=True, slots=True)
class Reply:
    """A response code (server to client)."""

    response: Response


@dataclass(frozen=True, slots=True)
class Mail:
    """INMAIL followed by the sender (S) and the payload (B)."""

    sender: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class InvalidName:
    """A string that is not a valid identifier (bad UTF-8, pattern, or too long); its
    bytes were consumed so the stream is still in step."""

    reason: str


@dataclass(frozen=True, slots=True)
class OversizedPayload:
    """A payload longer than the limit; its bytes were skipped, never stored."""

    size: int


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """The peer closed its side; `mid_command` if it did so inside an exchange."""

    mid_command: bool


class _Signal(Enum):
    NEED_DATA = "need data"
    PAUSED = "paused"  # the other side must send (a reply) before more can be decoded


NEED_DATA = _Signal.NEED_DATA
PAUSED = _Signal.PAUSED

ClientFrame = Command | Name | Digest | Payload | Timeout
ServerFrame = Reply | Mail
ServerEvent = (
    Command | UnknownCommand | Name | Digest | Payload | Timeout | InvalidName | OversizedPayload
) | EndOfStream
ClientEvent = Reply | Mail | EndOfStream


def check_identifier(name: str) -> str:
    """Return `name` if it matches `([a-zA-Z0-9]+\\.)*[a-zA-Z0-9]+`, else ValueError."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise ValueError(f"{name!r} is not a PostOffice identifier (a.b.c of [a-zA-Z0-9]+)")
    return name


# -- encoder --------------------------------------------------------------------------
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")


def encode_string(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise ValueError(f"string of {len(data)} bytes does not fit a 2-byte length")
    return _U16.pack(len(data)) + data


def encode_binary(data: bytes) -> bytes:
    if len(data) > MAX_BINARY_BYTES:
        raise ValueError(f"payload of {len(data)} bytes does not fit a 4-byte length")
    return _U32.pack(len(data)) + data


def encode(frame: ClientFrame | ServerFrame) -> bytes:
    """The bytes of one frame."""
    match frame:
        case Command(request):
            return bytes((Request(request),))
        case Reply(response):
            return bytes((Response(response),))
        case Name(name):
            return encode_string(check_identifier(name))
        case Digest(digest):
            return digest
        case Payload(data):
            return encode_binary(data)
        case Timeout(ms):
            if not INT32_MIN <= ms <= INT32_MAX:
                raise ValueError(f"timeout {ms} ms does not fit a signed 32-bit integer")
            return _I32.pack(ms)
        case Mail(sender, payload):
            return bytes((Response.INMAIL,)) + encode_string(sender) + encode_binary(payload)
    raise TypeError(f"not a frame: {frame!r}")


# -- decoder --------------------------------------------------------------------------
class Field(Enum):
    """What the decoder is asked to read next."""

    CODE = "code"
    NAME = "name"
    DIGEST = "digest"
    PAYLOAD = "payload"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class Limits:
    max_name_bytes: int = 255
    max_payload_bytes: int = 16 * 1024 * 1024
    # Unconsumed input kept at most; a peer that sends far ahead is cut off.
    max_buffer_bytes: int = 1024 * 1024


_CODE_BYTES = {code: bytes((code,)) for code in Response}
_COMMANDS = {request: Command(request) for request in Request}
_RESPONSE_OF: dict[int, Response] = {int(code): code for code in Response}


class Decoder:
    """Reads typed fields from a byte stream that arrives in arbitrary chunks.

    `read(field)` returns the decoded value or NEED_DATA. A length prefix over its limit
    makes the decoder skip that many bytes without keeping them and then report
    InvalidName / OversizedPayload. Only the bytes of one field are ever held beyond
    the input buffer, and only after its length passed the limit check.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._buffer = bytearray()
        self._pending_length: int | None = None
        self._skip = 0
        self._skip_result: InvalidName | OversizedPayload | None = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def mid_field(self) -> bool:
        return self._pending_length is not None or self._skip_result is not None

    def feed(self, data: bytes) -> None:
        if self._skip:  # skipping an oversized field: drop instead of buffering
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        if len(self._buffer) + len(data) > self.limits.max_buffer_bytes + (
            self._pending_length or 0
        ):
            raise LimitError(
                f"more than {self.limits.max_buffer_bytes} bytes sent ahead of the protocol"
            )
        self._buffer += data

    def _take(self, count: int) -> bytes | None:
        if len(self._buffer) < count:
            return None
        chunk = bytes(self._buffer[:count])
        del self._buffer[:count]
        return chunk

    def _start_skip(self, length: int, result: InvalidName | OversizedPayload) -> None:
        dropped = min(length, len(self._buffer))
        del self._buffer[:dropped]
        self._skip = length - dropped
        self._skip_result = result

    def read(self, field: Field) -> object:
        if self._skip_result is not None:
            if self._skip:
                return NEED_DATA
            result, self._skip_result = self._skip_result, None
            return result
        if field is Field.CODE:
            buffer = self._buffer
            if not buffer:
                return NEED_DATA
            code = buffer[0]
            del buffer[:1]
            return code
        if field is Field.DIGEST:
            chunk = self._take(DIGEST_SIZE)
            return NEED_DATA if chunk is None else Digest(chunk)
        if field is Field.TIMEOUT:
            chunk = self._take(4)
            return NEED_DATA if chunk is None else Timeout(_I32.unpack(chunk)[0])
        if field is Field.NAME:
            return self._read_name()
        return self._read_payload()

    def _read_name(self) -> object:
        if self._pending_length is None:
            prefix = self._take(2)
            if prefix is None:
                return NEED_DATA
            length = _U16.unpack(prefix)[0]
            if length > self.limits.max_name_bytes:
                self._start_skip(length, InvalidName(f"identifier of {length} bytes is too long"))
                return self.read(Field.NAME)
            self._pending_length = length
        data = self._take(self._pending_length)
        if data is None:
            return NEED_DATA
        self._pending_length = None
        try:
            text = data.decode("utf-8", "strict")
        except UnicodeDecodeError as exc:
            return InvalidName(f"identifier is not valid UTF-8: {exc.reason}")
        if not IDENTIFIER.fullmatch(text):
            return InvalidName(f"{text!r} is not a valid identifier")
        return Name(text)

    def _read_payload(self) -> object:
        if self._pending_length is None:
            prefix = self._take(4)
            if prefix is None:
                return NEED_DATA
            length = _U32.unpack(prefix)[0]
            if length > self.limits.max_payload_bytes:
                self._start_skip(length, OversizedPayload(length))
                return self.read(Field.PAYLOAD)
            self._pending_length = length
        data = self._take(self._pending_length)
        if data is None:
            return NEED_DATA
        self._pending_length = None
        return Payload(data)


# -- the conversation grammar ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Step:
    """One step of a request: what the client sends (None: only the code) and which
    replies end the request. REQDATA moves on to the next step."""

    sends: Field | None
    ends: frozenset[Response]


def _steps(*steps: tuple[Field | None, tuple[Response, ...]]) -> tuple[Step, ...]:
    return tuple(Step(sends, frozenset(ends)) for sends, ends in steps)


R = Response
# From ERRATA.md. CREATEBOX has one refusal, BOXEXISTS, also for names that are invalid,
# a group's, over a limit (see docs/postoffice.md).
SEQUENCES: Mapping[Request, tuple[Step, ...]] = {
    Request.CREATEBOX: _steps(
        (None, ()), (Field.NAME, ()), (Field.DIGEST, (R.REQGRANTED, R.BOXEXISTS))
    ),
    Request.REQBOX: _steps(
        (None, (R.ALREADYCONN,)),
        (Field.NAME, ()),
        (Field.DIGEST, (R.REQGRANTED, R.NONEXISTBOX, R.NOAUTH, R.BOXINUSE)),
    ),
    Request.RETBOX: _steps((None, (R.NOBOXCONN, R.REQGRANTED))),
    Request.REMOVEBOX: _steps((None, (R.NOBOXCONN, R.REQGRANTED, R.NONEXISTBOX, R.NOAUTH))),
    Request.SENDLETTER: _steps(
        (None, (R.NOBOXCONN,)), (Field.NAME, ()), (Field.PAYLOAD, (R.REQGRANTED, R.DELFAIL))
    ),
    # After the timeout, REQDATA opens the NEXTLETTER/SATIATED loop.
    Request.GETMAIL: _steps((None, (R.NOBOXCONN,)), (Field.TIMEOUT, (R.MAILTIMEOUT,))),
    Request.EMPTYBOX: _steps((None, (R.REQGRANTED, R.NOBOXCONN))),
    Request.DISCONNECT: _steps((None, (R.REQGRANTED,))),
    Request.NEXTLETTER: _steps((None, (R.BADCOMMAND,))),
    Request.SATIATED: _steps((None, (R.BADCOMMAND,))),
}
_BAD = _steps((None, (R.BADCOMMAND,)))
# The server may send these at any point; the connection ends after them.
ANYTIME = frozenset((Response.SHUTDOWN, Response.COMMTIMEOUT))
REFUSALS = frozenset((Response.BADCOMMAND, Response.UNSUPPORTED))


@functools.lru_cache(maxsize=128)
def allowed_replies(request: Request | None, step: int) -> frozenset[Response]:
    """Replies the server may give at `step` of `request` (None: an unknown code)."""
    steps = _BAD if request is None else SEQUENCES[request]
    current = steps[step]
    more = frozenset((Response.REQDATA,)) if step + 1 < len(steps) else frozenset()
    if request is Request.GETMAIL and step == 1:
        more = frozenset((Response.REQDATA,))
    if step == 0:
        # Any request code may be refused outright by a server that does not know it
        # (BADCOMMAND) or does not offer it (UNSUPPORTED); this daemon knows them all.
        more |= REFUSALS
    return current.ends | more | ANYTIME


class Phase(Enum):
    IDLE = "idle"  # between requests
    REPLY = "reply"  # the server owes a reply to the current step
    DATA = "data"  # the client owes the current step's data
    MAIL_LOOP = "mail loop"  # inside GETMAIL: NEXTLETTER or SATIATED expected
    MAIL_REPLY = "mail reply"  # the server owes an answer to NEXTLETTER/SATIATED/other
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Position:
    """Where a conversation stands; both roles share this bookkeeping."""

    phase: Phase = Phase.IDLE
    request: Request | None = None
    step: int = 0
    loop_request: Request | None = None  # what the client sent inside the mail loop
    # A small int naming this position, for the transition memos, and what the client
    # sends next there (both set by _at, for the hot path).
    key: int = dc_field(default=-1, compare=False, repr=False)
    expects: Field | None = dc_field(default=None, compare=False, repr=False)


_POSITIONS: dict[tuple[Phase, Request | None, int, Request | None], Position] = {}


def _at(
    phase: Phase, request: Request | None = None, step: int = 0, loop: Request | None = None
) -> Position:
    """The interned Position: conversations move through a few dozen of them, built
    once each, so that transitions can be memoized by `key`."""
    index = (phase, request, step, loop)
    pos = _POSITIONS.get(index)
    if pos is None:
        plain = Position(phase, request, step, loop)
        pos = Position(phase, request, step, loop, len(_POSITIONS), expected_field(plain))
        _POSITIONS[index] = pos
    return pos


# Transitions are pure functions of (position, code): memoized per interned position.
# A transition that raises StateError is not memoized (it is an error every time).
_REPLY_MEMO: dict[tuple[int, int], Position] = {}
_CODE_MEMO: dict[tuple[int, int], Position] = {}


def _after_reply(pos: Position, response: Response) -> Position:
    key = (pos.key, response)
    after = _REPLY_MEMO.get(key)
    if after is None:
        after = _REPLY_MEMO[key] = _reply_transition(pos, response)
    return after


def _after_code(pos: Position, code: int) -> Position:
    key = (pos.key, code)
    after = _CODE_MEMO.get(key)
    if after is None:
        after = _CODE_MEMO[key] = _code_transition(pos, code)
    return after


_DATA_MEMO: dict[int, Position] = {}


def _after_data(pos: Position) -> Position:
    """The position after the client sent the data its step asked for."""
    after = _DATA_MEMO.get(pos.key)
    if after is None:
        after = _DATA_MEMO[pos.key] = _at(Phase.REPLY, pos.request, pos.step)
    return after


def _reply_transition(pos: Position, response: Response) -> Position:
    """The position after the server's reply `response` at `pos` (StateError if the
    reply is not allowed there)."""
    if response in ANYTIME:
        return _at(Phase.CLOSED)
    if pos.phase is Phase.REPLY:
        allowed = allowed_replies(pos.request, pos.step)
        if response not in allowed:
            name = pos.request.name if pos.request is not None else "an unknown code"
            raise StateError(f"{response.name} is not a reply to step {pos.step} of {name}")
        if response is Response.REQDATA:
            assert pos.request is not None
            if pos.request is Request.GETMAIL and pos.step == 1:
                return _at(Phase.MAIL_LOOP, Request.GETMAIL)
            return _at(Phase.DATA, pos.request, pos.step + 1)
        if pos.request is Request.DISCONNECT:
            return _at(Phase.CLOSED)
        return _at(Phase.IDLE)
    if pos.phase is Phase.MAIL_REPLY:
        loop = pos.loop_request
        if loop is Request.NEXTLETTER:
            allowed = frozenset((Response.INMAIL, Response.MAILTIMEOUT))
        elif loop is Request.SATIATED:
            allowed = frozenset((Response.REQGRANTED,))
        else:
            allowed = frozenset((Response.BADCOMMAND,))
        if response not in allowed:
            raise StateError(f"{response.name} is not an answer inside GETMAIL")
        if response in (Response.MAILTIMEOUT, Response.REQGRANTED):
            return _at(Phase.IDLE)
        return _at(Phase.MAIL_LOOP, Request.GETMAIL)
    raise StateError(f"no reply is due ({pos.phase.value})")


_FRAME_OF: Mapping[Field, type] = {
    Field.NAME: Name,
    Field.DIGEST: Digest,
    Field.PAYLOAD: Payload,
    Field.TIMEOUT: Timeout,
}


def _code_transition(pos: Position, code: int) -> Position:
    """The position after the client sent code byte `code` at `pos`."""
    if pos.phase is Phase.IDLE:
        try:
            request: Request | None = Request(code)
        except ValueError:
            request = None
        return _at(Phase.REPLY, request, 0)
    if pos.phase is Phase.MAIL_LOOP:
        try:
            loop: Request | None = Request(code)
        except ValueError:
            loop = None
        if loop not in (Request.NEXTLETTER, Request.SATIATED):
            loop = None
        return _at(Phase.MAIL_REPLY, Request.GETMAIL, 0, loop)
    raise StateError(f"a request code is not expected ({pos.phase.value})")


def expected_field(pos: Position) -> Field | None:
    """What the client sends next at `pos` (None when it is the server's turn)."""
    if pos.phase in (Phase.IDLE, Phase.MAIL_LOOP):
        return Field.CODE
    if pos.phase is Phase.DATA:
        assert pos.request is not None
        return SEQUENCES[pos.request][pos.step].sends
    return None


# -- server role ----------------------------------------------------------------------
class ServerProtocol:
    """The clerk's side: decodes what the client sends, checks what the clerk answers.

    After an event that needs an answer, `next_event` returns PAUSED until the clerk
    has `send`-ed a reply: only the reply tells what the client's next bytes mean.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self._decoder = Decoder(limits)
        self._pos = _at(Phase.IDLE)
        self._eof = False

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
        """Add bytes from the client; b"" means it closed its side."""
        if not data:
            self._eof = True
            return
        self._decoder.feed(data)

    def next_event(self) -> ServerEvent | _Signal:
        pos = self._pos
        field = pos.expects
        if field is None:  # the clerk's turn to answer, or closed
            return PAUSED
        value = self._decoder.read(field)
        if value is NEED_DATA:
            if self._eof:
                mid = self.mid_command or self._decoder.buffered > 0
                self._pos = _at(Phase.CLOSED)
                return EndOfStream(mid)
            return NEED_DATA
        if field is Field.CODE:
            code = cast(int, value)
            new = self._pos = _after_code(pos, code)
            request = new.loop_request if new.phase is Phase.MAIL_REPLY else new.request
            return UnknownCommand(code) if request is None else _COMMANDS[request]
        self._pos = _after_data(pos)
        return cast(ServerEvent, value)

    def send(self, frame: ServerFrame) -> bytes:
        """Bytes of the clerk's answer; StateError if it is not allowed now."""
        response = Response.INMAIL if isinstance(frame, Mail) else frame.response
        self._pos = _after_reply(self._pos, response)
        return encode(frame)

    def reply(self, response: Response) -> bytes:
        """`send(Reply(response))` without building the frame (the clerk's hot path)."""
        self._pos = _after_reply(self._pos, response)
        return _CODE_BYTES[response]


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
        self._recv_pos = _at(Phase.IDLE)  # what the next reply answers
        self._send_pos = _at(Phase.IDLE)  # where the next frame goes, assuming REQDATA
        self._in_flight: list[Position] = []  # positions whose replies are pending
        self._eof = False
        self._mail_sender: str | None = None
        self._mail_stage = 0  # 0: code, 1: sender, 2: payload

    @property
    def closed(self) -> bool:
        return self._recv_pos.phase is Phase.CLOSED

    @property
    def idle(self) -> bool:
        return not self._in_flight and self._send_pos.phase is Phase.IDLE

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
            after = _after_code(pos, frame.request)
        else:
            if field is Field.CODE or not isinstance(frame, _FRAME_OF[field]):
                raise StateError(f"{type(frame).__name__} sent where {field.value} is due")
            after = _after_data(pos)
        data = encode(frame)
        self._in_flight.append(after)
        self._send_pos = self._predict(after)
        return data

    @staticmethod
    def _predict(pos: Position) -> Position:
        """Where the conversation goes if the server answers REQDATA at `pos`, or a
        REPLY position (nothing more can be sent) when the answer ends the step."""
        if pos.phase is Phase.REPLY and Response.REQDATA in allowed_replies(pos.request, pos.step):
            return _after_reply(pos, Response.REQDATA)
        return pos

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
            return
        self._decoder.feed(data)

    def next_event(self) -> ClientEvent | _Signal:
        if self._recv_pos.phase is Phase.CLOSED:
            return PAUSED
        if not self._in_flight:
            # Nothing asked: only SHUTDOWN (e.g. connection limit) may arrive unasked.
            if self._decoder.buffered:
                code = self._decoder.read(Field.CODE)
                assert isinstance(code, int)
                if code == Response.SHUTDOWN or code == Response.COMMTIMEOUT:
                    self._close()
                    return Reply(Response(code))
                raise StateError(f"the server sent code {code} unasked")
            if self._eof:
                self._close()
                return EndOfStream(False)
            return PAUSED
        pos = self._in_flight[0]
        if self._mail_stage == 0:
            value = self._decoder.read(Field.CODE)
            if value is NEED_DATA:
                return self._need_data()
            assert isinstance(value, int)
            response = _RESPONSE_OF.get(value)
            if response is None:
                raise ProtocolError(f"unknown response code {value}")
            if response is Response.INMAIL and pos.loop_request is Request.NEXTLETTER:
                _after_reply(pos, response)  # checks it is allowed
                self._mail_stage = 1
            else:
                return self._reply(pos, response)
        if self._mail_stage == 1:
            value = self._decoder.read(Field.NAME)
            if value is NEED_DATA:
                return self._need_data()
            if isinstance(value, InvalidName):
                raise ProtocolError(f"letter with an invalid sender: {value.reason}")
            assert isinstance(value, Name)
            self._mail_sender = value.name
            self._mail_stage = 2
        value = self._decoder.read(Field.PAYLOAD)
        if value is NEED_DATA:
            return self._need_data()
        if isinstance(value, OversizedPayload):
            raise LimitError(f"letter of {value.size} bytes is over this client's limit")
        assert isinstance(value, Payload) and self._mail_sender is not None
        mail = Mail(self._mail_sender, value.data)
        self._mail_stage = 0
        self._mail_sender = None
        self._in_flight.pop(0)
        self._recv_pos = _after_reply(pos, Response.INMAIL)
        if not self._in_flight:
            self._send_pos = self._recv_pos
        return mail

    def _need_data(self) -> ClientEvent | _Signal:
        if self._eof:
            self._close()
            return EndOfStream(True)
        return NEED_DATA

    def _close(self) -> None:
        self._recv_pos = self._send_pos = _at(Phase.CLOSED)
        self._in_flight.clear()

    def _reply(self, pos: Position, response: Response) -> Reply:
        after = _after_reply(pos, response)
        self._in_flight.pop(0)
        self._recv_pos = after
        if after.phase is Phase.CLOSED:
            self._close()
        elif response is not Response.REQDATA and self._in_flight:
            self._close()
            raise StateError(
                f"{response.name} ended the request while {len(self._in_flight)} "
                "frame(s) sent ahead were unanswered; the connection is out of step"
            )
        elif not self._in_flight:
            self._send_pos = after
        return Reply(response)
