"""The relay's wire format, sans-IO: four frames, an encoder and an incremental decoder.

A frame is a 1-byte type, a 4-byte big-endian body length, then the body:

    HELLO    participant -> relay   b"MBRELAY" version(1) uidvalidity(4) last_uid(4)
    WELCOME  relay -> participant   uidvalidity(4) next_uid(4)
    MAIL     relay -> participant   uidvalidity(4) uid(4) raw email bytes
    BYE      relay -> participant   reason, UTF-8
    NUDGE    participant -> relay   (empty) it has just sent mail: poll now

HELLO says where the participant is (uidvalidity 0: a new participant, "from now on");
the relay answers WELCOME with its own position and then sends MAIL frames in UID
order, those the participant missed first. NUDGE, after HELLO, any number of times,
lets a participant that sends mail pull the relay out of IMAP IDLE (whose announcement
comes about 0.5 s after delivery on Dovecot) so that mail sent on the host is seen fast.
Each side decodes only the frames the other side may send, and a length over the limit
is refused on the prefix, before any buffer grows: garbage on the socket is an error at
the first bytes, not an allocation.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

MAGIC = b"MBRELAY"
VERSION = 1
_HEADER = struct.Struct(">BI")
_TWO_U32 = struct.Struct(">II")
_HELLO = struct.Struct(">7sBII")
MAX_REASON_BYTES = 1024
U32_MAX = 2**32 - 1


class RelayProtocolError(ValueError):
    """Bytes that are not the relay protocol; the connection cannot continue."""


class FrameType(IntEnum):
    HELLO = 1
    WELCOME = 2
    MAIL = 3
    BYE = 4
    NUDGE = 5


@dataclass(frozen=True, slots=True)
class Hello:
    uidvalidity: int  # 0: a participant that has received nothing yet
    last_uid: int  # the last UID it received (it wants the ones after)


@dataclass(frozen=True, slots=True)
class Welcome:
    uidvalidity: int
    next_uid: int  # the first UID the relay has not read from the mailbox yet


@dataclass(frozen=True, slots=True)
class Mail:
    uidvalidity: int
    uid: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Bye:
    reason: str


@dataclass(frozen=True, slots=True)
class Nudge:
    pass


Frame = Hello | Welcome | Mail | Bye | Nudge
PARTICIPANT_SENDS = frozenset({FrameType.HELLO, FrameType.NUDGE})
RELAY_SENDS = frozenset({FrameType.WELCOME, FrameType.MAIL, FrameType.BYE})


def _u32(name: str, value: int) -> int:
    if not 0 <= value <= U32_MAX:
        raise ValueError(f"{name} {value} does not fit in 32 bits")
    return value


def encode(frame: Frame) -> bytes:
    if isinstance(frame, Hello):
        kind = FrameType.HELLO
        body = _HELLO.pack(
            MAGIC, VERSION, _u32("uidvalidity", frame.uidvalidity), _u32("uid", frame.last_uid)
        )
    elif isinstance(frame, Welcome):
        kind = FrameType.WELCOME
        body = _TWO_U32.pack(_u32("uidvalidity", frame.uidvalidity), _u32("uid", frame.next_uid))
    elif isinstance(frame, Mail):
        kind = FrameType.MAIL
        head = _TWO_U32.pack(_u32("uidvalidity", frame.uidvalidity), _u32("uid", frame.uid))
        return _HEADER.pack(kind, len(head) + len(frame.data)) + head + frame.data
    elif isinstance(frame, Nudge):
        return _HEADER.pack(FrameType.NUDGE, 0)
    else:
        kind = FrameType.BYE
        # Cut on a character boundary, so that the cut reason is still UTF-8.
        cut = frame.reason.encode("utf-8")[:MAX_REASON_BYTES]
        body = cut.decode("utf-8", "ignore").encode("utf-8")
    return _HEADER.pack(kind, len(body)) + body


class Decoder:
    """Bytes in any chunking -> frames. `accept` names the frame types this side may
    receive; `max_mail_bytes` bounds a MAIL's email. Any violation raises
    RelayProtocolError and the decoder stays broken (the caller closes the socket)."""

    def __init__(self, accept: frozenset[FrameType], max_mail_bytes: int) -> None:
        self._accept = accept
        self._limits = {
            FrameType.HELLO: _HELLO.size,
            FrameType.WELCOME: _TWO_U32.size,
            FrameType.MAIL: _TWO_U32.size + max_mail_bytes,
            FrameType.BYE: MAX_REASON_BYTES,
            FrameType.NUDGE: 0,
        }
        self._buffer = bytearray()
        self._error: RelayProtocolError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        self._check()
        self._buffer += data
        if len(self._buffer) >= _HEADER.size:
            self._header()  # refuse garbage at once, even before its body arrives

    def next_frame(self) -> Frame | None:
        """The next whole frame, or None until more bytes arrive."""
        self._check()
        if len(self._buffer) < _HEADER.size:
            return None
        kind, length = self._header()
        end = _HEADER.size + length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        try:
            return _parse(kind, body)
        except RelayProtocolError as exc:
            self._error = exc
            raise

    def _header(self) -> tuple[FrameType, int]:
        code, length = _HEADER.unpack_from(self._buffer)
        if code not in self._accept:
            self._fail(f"unexpected frame type {code} (first bytes {bytes(self._buffer[:8])!r})")
        kind = FrameType(code)
        if length > self._limits[kind]:
            self._fail(f"{kind.name} of {length} bytes is over the limit of {self._limits[kind]}")
        return kind, length

    def _fail(self, reason: str) -> None:
        self._error = RelayProtocolError(reason)
        raise self._error

    def _check(self) -> None:
        if self._error is not None:
            raise RelayProtocolError(f"the stream is broken since: {self._error}")


def _parse(kind: FrameType, body: bytes) -> Frame:
    if kind is FrameType.HELLO:
        if len(body) != _HELLO.size:
            raise RelayProtocolError(f"HELLO of {len(body)} bytes, expected {_HELLO.size}")
        magic, version, uidvalidity, last_uid = _HELLO.unpack(body)
        if magic != MAGIC:
            raise RelayProtocolError(f"not a Mailbus relay client (magic {magic!r})")
        if version != VERSION:
            raise RelayProtocolError(f"relay protocol version {version}, this relay speaks 1")
        return Hello(uidvalidity, last_uid)
    if kind is FrameType.WELCOME:
        if len(body) != _TWO_U32.size:
            raise RelayProtocolError(f"WELCOME of {len(body)} bytes, expected {_TWO_U32.size}")
        return Welcome(*_TWO_U32.unpack(body))
    if kind is FrameType.MAIL:
        if len(body) < _TWO_U32.size:
            raise RelayProtocolError(f"MAIL of {len(body)} bytes has no UIDs")
        uidvalidity, uid = _TWO_U32.unpack_from(body)
        return Mail(uidvalidity, uid, body[_TWO_U32.size :])
    if kind is FrameType.NUDGE:
        return Nudge()
    try:
        return Bye(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RelayProtocolError(f"BYE reason is not UTF-8: {exc}") from None
