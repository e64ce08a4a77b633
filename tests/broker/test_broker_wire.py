"""The A1 60 wire codec, byte by byte, its strict decoder, and messages themselves."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.broker import BrokerMessage, WireFormatError, decode, encode
from mailbus.broker.wire import MIN_SIZE

# One message written out by hand from the layout in ERRATA.md.
KNOWN = BrokerMessage(b"hi", {"a": "b"})
KNOWN_BYTES = (
    b"\xa1\x60"  # magic
    + b"\x00\x00\x00\x14"  # total size 20
    + b"\x00\x00\x00\x01"  # one property
    + b"a\x00b\x00"
    + b"\x00\x00\x00\x02"  # content length
    + b"hi"
)

keys = st.text(
    alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1
)
values = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)))
messages = st.builds(
    BrokerMessage, st.binary(max_size=300), st.dictionaries(keys, values, max_size=6)
)


def test_encode_matches_the_layout_byte_by_byte() -> None:
    assert encode(KNOWN) == KNOWN_BYTES
    assert decode(KNOWN_BYTES) == KNOWN


def test_the_smallest_message_is_fourteen_bytes() -> None:
    empty = encode(BrokerMessage())
    assert len(empty) == MIN_SIZE == 14
    assert empty == b"\xa1\x60\x00\x00\x00\x0e" + b"\x00" * 8
    assert decode(empty) == BrokerMessage()


def test_non_ascii_properties_are_counted_in_bytes() -> None:
    message = BrokerMessage("é".encode(), {"clé": "värde"})
    data = encode(message)
    assert struct.unpack(">I", data[2:6])[0] == len(data)
    assert decode(data) == message


@given(messages)
@settings(max_examples=150, deadline=None)
def test_round_trip(message: BrokerMessage) -> None:
    assert decode(encode(message)) == message


@given(messages, st.data())
@settings(max_examples=100, deadline=None)
def test_every_truncation_and_extension_is_rejected(
    message: BrokerMessage, data: st.DataObject
) -> None:
    wire = encode(message)
    cut = data.draw(st.integers(0, len(wire) - 1))
    with pytest.raises(WireFormatError):
        decode(wire[:cut])
    with pytest.raises(WireFormatError):
        decode(wire + data.draw(st.binary(min_size=1, max_size=8)))


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_raises_only_wire_format_errors(data: bytes) -> None:
    # Anything the strict decoder accepts is canonical: it encodes back to the same bytes.
    try:
        message = decode(data)
    except WireFormatError:
        return
    assert encode(message) == data


@given(messages, st.data())
@settings(max_examples=150, deadline=None)
def test_a_flipped_byte_never_escapes_as_another_exception(
    message: BrokerMessage, data: st.DataObject
) -> None:
    wire = bytearray(encode(message))
    index = data.draw(st.integers(0, len(wire) - 1))
    wire[index] ^= data.draw(st.integers(1, 255))
    try:
        decoded = decode(bytes(wire))
    except WireFormatError:
        return
    assert encode(decoded) == bytes(wire)


def _frame(body: bytes, *, magic: bytes = b"\xa1\x60", total: int | None = None) -> bytes:
    size = 6 + len(body) if total is None else total
    return magic + struct.pack(">I", size) + body


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (KNOWN_BYTES[:13], "13 bytes is too short"),
        (b"", "0 bytes is too short"),
        (b"\xa1\x61" + KNOWN_BYTES[2:], "bad header"),
        (b"\x60\xa1" + KNOWN_BYTES[2:], "bad header"),
        (KNOWN_BYTES[:2] + b"\x00\x00\x00\x15" + KNOWN_BYTES[6:], "declared size 21"),
        (KNOWN_BYTES[:2] + b"\x00\x00\x00\x13" + KNOWN_BYTES[6:], "declared size 19"),
        # one property declared, its key has no NUL before the content length
        (_frame(b"\x00\x00\x00\x01" + b"abc" + b"\x00\x00\x00\x00"), "key is not NUL"),
        (_frame(b"\x00\x00\x00\x01" + b"abcd" + b"\x00\x00\x00\x00"), "key is not NUL"),
        (_frame(b"\x00\x00\x00\x01" + b"a\x00bc" + b"\x00\x00\x00\x00"), "value is not NUL"),
        (_frame(b"\x00\x00\x00\x02" + b"a\x00b\x00" + b"\x00\x00\x00\x00"), "cannot fit"),
        (_frame(b"\x00\x00\x00\x02" + b"a\x00b\x00cd" + b"\x00\x00\x00\x00"), "key is not NUL"),
        (_frame(b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"), "cannot fit"),
        (_frame(b"\x00\x00\x00\x01" + b"\x00b\x00" + b"\x00\x00\x00\x00"), "empty key"),
        (_frame(b"\x00\x00\x00\x02" + b"a\x00b\x00a\x00c\x00" + b"\x00\x00\x00\x00"), "twice"),
        (_frame(b"\x00\x00\x00\x01" + b"\xff\x00b\x00" + b"\x00\x00\x00\x00"), "not UTF-8"),
        (_frame(b"\x00\x00\x00\x01" + b"a\x00\xc3\x00" + b"\x00\x00\x00\x00"), "not UTF-8"),
        # content length says 5 but 2 bytes follow, or says 1 and 2 follow
        (_frame(b"\x00\x00\x00\x00" + b"\x00\x00\x00\x05" + b"hi"), "content length 5"),
        (_frame(b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"hi"), "content length 1"),
        (_frame(b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"hi"), "content length"),
    ],
)
def test_decoder_rejects(data: bytes, problem: str) -> None:
    with pytest.raises(WireFormatError, match=problem):
        decode(data)


def test_the_error_names_the_offset() -> None:
    data = _frame(b"\x00\x00\x00\x01" + b"a\x00b\x00" + b"\x00\x00\x00\x09" + b"hi")
    with pytest.raises(WireFormatError) as caught:
        decode(data)
    assert caught.value.offset == 14


def test_oversized_declared_size_is_refused_before_parsing() -> None:
    big = encode(BrokerMessage(b"x" * 1000))
    with pytest.raises(WireFormatError, match="exceeds the limit"):
        decode(big, max_size=999)
    assert decode(big, max_size=len(big)).content == b"x" * 1000


def test_decode_accepts_bytearray_and_memoryview() -> None:
    assert decode(bytearray(KNOWN_BYTES)) == KNOWN
    assert decode(memoryview(KNOWN_BYTES)) == KNOWN


# -- the message type -------------------------------------------------------------------
def test_messages_are_read_only() -> None:
    message = BrokerMessage(b"x", {"k": "v"})
    with pytest.raises(AttributeError):
        message.content = b"y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        message.properties["k"] = "w"  # type: ignore[index]


def test_message_copies_its_inputs() -> None:
    props = {"k": "v"}
    content = bytearray(b"abc")
    message = BrokerMessage(content, props)
    props["k"] = "changed"
    content[0] = ord("z")
    assert message.properties == {"k": "v"}
    assert message.content == b"abc"


@pytest.mark.parametrize(
    ("content", "properties", "error"),
    [
        (b"", {"a\0b": "v"}, ValueError),
        (b"", {"k": "v\0"}, ValueError),
        (b"", {"": "v"}, ValueError),
        (b"", {"k": 1}, TypeError),
        (b"", {1: "v"}, TypeError),
        (123, None, TypeError),
    ],
)
def test_message_rejects_what_cannot_travel(
    content: object, properties: object, error: type
) -> None:
    with pytest.raises(error):
        BrokerMessage(content, properties)  # type: ignore[arg-type]


def test_text_content_is_utf8_and_with_properties_copies() -> None:
    message = BrokerMessage("€", {"a": "1"})
    assert message.content == "€".encode()
    more = message.with_properties(b="2")
    assert more.properties == {"a": "1", "b": "2"}
    assert message.properties == {"a": "1"}
    assert hash(BrokerMessage(b"x", {"a": "1"})) == hash(BrokerMessage(b"x", {"a": "1"}))
