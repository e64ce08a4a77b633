"""The PostOffice wire format, sans-IO: codes, frames, the encoder and the decoder.

Every code is one byte (values from ERRATA.md, not the typos of the protocol document).
A string is a 2-byte big-endian byte length then strict UTF-8, binary a 4-byte big-endian
length then the bytes, a password the 16 raw bytes of an MD5 digest, a timeout a signed
4-byte big-endian count of milliseconds.

Limits are checked on the length prefix, before any buffer is allocated: a string or a
payload over its limit is skipped byte by byte (the stream stays in step) and reported
as an `InvalidName` / `OversizedPayload` event, which the clerk refuses with a code.
What a frame means depends on where the conversation is: `grammar` says that, and
`protocol` drives the decoder with it.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from enum import Enum, IntEnum

DEFAULT_PORT = 8228
DIGEST_SIZE = 16
IDENTIFIER = re.compile(r"(?:[a-zA-Z0-9]+\.)*[a-zA-Z0-9]+")
MAX_STRING_BYTES = 0xFFFF  # what the 2-byte prefix can say
MAX_BINARY_BYTES = 0xFFFFFFFF
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class RequestCode(IntEnum):
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


class ResponseCode(IntEnum):
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

    request: RequestCode


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

    response: ResponseCode


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


class Signal(Enum):
    NEED_DATA = "need data"
    PAUSED = "paused"  # the other side must send (a reply) before more can be decoded


NEED_DATA = Signal.NEED_DATA
PAUSED = Signal.PAUSED

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
            return bytes((RequestCode(request),))
        case Reply(response):
            return bytes((ResponseCode(response),))
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
            return bytes((ResponseCode.INMAIL,)) + encode_string(sender) + encode_binary(payload)
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
