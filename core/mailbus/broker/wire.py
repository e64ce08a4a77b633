"""The broker message wire layout, as the reference serialised it (see ERRATA):

    A1 60                      magic
    u32 BE                     total size of the whole buffer
    u32 BE                     property count
    count x (key NUL value NUL) UTF-8
    u32 BE                     content length
    content

so the smallest message (no property, no content) is 14 bytes. The decoder is strict:
a buffer that disagrees with its own sizes, has trailing bytes, repeats a key or is not
UTF-8 is rejected with a WireFormatError naming the offset. Pure functions, no I/O.
"""

from __future__ import annotations

import struct

from mailbus.broker.errors import WireFormatError
from mailbus.broker.message import BrokerMessage

MAGIC = b"\xa1\x60"
MIN_SIZE = 14
MAX_WIRE_SIZE = 0xFFFFFFFF
# What decode() accepts unless told otherwise: enough for any sane message, and a
# declared size above it is refused before anything is parsed.
DEFAULT_MAX_SIZE = 64 * 1024 * 1024

_U32 = struct.Struct(">I")
_HEADER = struct.Struct(">2sII")


def encode(message: BrokerMessage) -> bytes:
    """The wire bytes of `message`."""
    parts: list[bytes] = []
    for key, value in message.properties.items():
        parts.append(key.encode("utf-8"))
        parts.append(b"\0")
        parts.append(value.encode("utf-8"))
        parts.append(b"\0")
    props = b"".join(parts)
    content = message.content
    total = MIN_SIZE + len(props) + len(content)
    if total > MAX_WIRE_SIZE:
        raise WireFormatError(f"message of {total} bytes does not fit a u32 size field")
    return b"".join(
        (
            _HEADER.pack(MAGIC, total, len(message.properties)),
            props,
            _U32.pack(len(content)),
            content,
        )
    )


def _not_utf8(buf: bytes, start: int, end: int, what: str) -> WireFormatError:
    try:
        buf[start:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        return WireFormatError(f"{what} is not UTF-8 ({exc.reason})", start + exc.start)
    raise AssertionError("called for text that decodes")  # pragma: no cover


def decode(
    data: bytes | bytearray | memoryview, *, max_size: int = DEFAULT_MAX_SIZE
) -> BrokerMessage:
    """The message in `data`, which must be exactly one encoded message."""
    buf = bytes(data)
    size = len(buf)
    if size < MIN_SIZE:
        raise WireFormatError(f"{size} bytes is too short, a message has at least {MIN_SIZE}")
    magic, total, count = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise WireFormatError(f"bad header {magic.hex()}, expected {MAGIC.hex()}")
    if total > max_size:
        raise WireFormatError(f"declared size {total} exceeds the limit of {max_size}", 2)
    if total != size:
        raise WireFormatError(f"declared size {total} but the buffer holds {size} bytes", 2)
    content_field = size - 4  # the content length must still fit after the properties
    # Every property takes at least 3 bytes (a 1-byte key and two NULs): refuse a count
    # that cannot fit before looping over it.
    if count > (content_field - 10) // 3:
        raise WireFormatError(f"property count {count} cannot fit in {size} bytes", 6)
    properties: dict[str, str] = {}
    pos = 10
    find = buf.find
    for index in range(count):
        key_end = find(b"\0", pos, content_field)
        if key_end < 0:
            raise WireFormatError(f"property {index}: key is not NUL-terminated", pos)
        if key_end == pos:
            raise WireFormatError(f"property {index}: empty key", pos)
        value_end = find(b"\0", key_end + 1, content_field)
        if value_end < 0:
            raise WireFormatError(f"property {index}: value is not NUL-terminated", key_end + 1)
        try:
            key = buf[pos:key_end].decode("utf-8")
        except UnicodeDecodeError:
            raise _not_utf8(buf, pos, key_end, f"property {index} key") from None
        try:
            value = buf[key_end + 1 : value_end].decode("utf-8")
        except UnicodeDecodeError:
            raise _not_utf8(buf, key_end + 1, value_end, f"property {key!r} value") from None
        if key in properties:
            raise WireFormatError(f"property {key!r} appears twice", pos)
        properties[key] = value
        pos = value_end + 1
    if pos + 4 > size:
        raise WireFormatError("truncated before the content length", pos)
    (length,) = _U32.unpack_from(buf, pos)
    pos += 4
    if length != size - pos:
        raise WireFormatError(
            f"content length {length} disagrees with the {size - pos} bytes that remain", pos - 4
        )
    # Keys and values were checked above (non-empty, no NUL, str): skip re-checking.
    return BrokerMessage._trusted(buf[pos:], properties)
