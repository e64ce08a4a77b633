"""Property tests of the sans-IO protocol: round trips, any chunking, arbitrary bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mailbus.postoffice.protocol import (
    ANYTIME,
    NEED_DATA,
    PAUSED,
    ClientProtocol,
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
    Phase,
    ProtocolError,
    Reply,
    RequestCode,
    ResponseCode,
    ServerProtocol,
    Timeout,
    UnknownCommand,
    allowed_replies,
    encode,
    expected_field,
)

from .golden import CONVERSATION

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
identifiers = st.from_regex(r"\A(?:[a-zA-Z0-9]{1,8}\.){0,3}[a-zA-Z0-9]{1,8}\Z")
payloads = st.binary(max_size=300)
digests = st.binary(min_size=16, max_size=16)
timeouts = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks, start = [], 0
    for point in [*points, len(data)]:
        chunks.append(data[start:point])
        start = point
    return [c for c in chunks if c]


# -- round trips --------------------------------------------------------------------
@SETTINGS
@given(
    st.one_of(
        st.builds(Name, identifiers),
        st.builds(Digest, digests),
        st.builds(Payload, payloads),
        st.builds(Timeout, timeouts),
    )
)
def test_data_frames_round_trip(frame: Any) -> None:
    field = {Name: Field.NAME, Digest: Field.DIGEST, Payload: Field.PAYLOAD, Timeout: Field.TIMEOUT}
    decoder = Decoder()
    decoder.feed(encode(frame))
    assert decoder.read(field[type(frame)]) == frame
    assert decoder.buffered == 0


@SETTINGS
@given(st.sampled_from(list(RequestCode)), st.sampled_from(list(ResponseCode)))
def test_codes_round_trip(request: RequestCode, response: ResponseCode) -> None:
    decoder = Decoder()
    decoder.feed(encode(Command(request)) + encode(Reply(response)))
    assert decoder.read(Field.CODE) == request
    assert decoder.read(Field.CODE) == response


@SETTINGS
@given(identifiers, payloads, st.lists(st.integers(min_value=0), max_size=20))
def test_mail_round_trips_in_any_chunking(sender: str, payload: bytes, cuts: list[int]) -> None:
    proto = ClientProtocol()
    proto.send(Command(RequestCode.GETMAIL))
    proto.send(Timeout(0))
    proto.receive_data(b"\x01\x01")
    assert proto.next_event() == Reply(ResponseCode.REQDATA)
    assert proto.next_event() == Reply(ResponseCode.REQDATA)
    proto.send(Command(RequestCode.NEXTLETTER))
    for chunk in split(encode(Mail(sender, payload)), cuts):
        assert proto.next_event() is NEED_DATA
        proto.receive_data(chunk)
    assert proto.next_event() == Mail(sender, payload)


# -- generated conversations ------------------------------------------------------------
@st.composite
def conversations(draw: st.DrawFn) -> tuple[bytes, list[object], list[Reply | Mail]]:
    """A valid conversation: the client's bytes, the events a server decodes from them,
    and the replies a scripted clerk gives (drawn among those allowed)."""
    server = ServerProtocol()
    wire = bytearray()
    events: list[object] = []
    replies: list[Reply | Mail] = []
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        pos = server.position
        field = expected_field(pos)
        if field is Field.CODE:
            code = draw(st.integers(min_value=0, max_value=255))
            data = bytes((code,))
        elif field is Field.NAME:
            data = encode(Name(draw(identifiers)))
        elif field is Field.DIGEST:
            data = draw(digests)
        elif field is Field.PAYLOAD:
            data = encode(Payload(draw(payloads)))
        else:
            data = encode(Timeout(draw(timeouts)))
        server.receive_data(data)
        event = server.next_event()
        assert event not in (NEED_DATA, PAUSED)
        wire += data
        events.append(event)
        pos = server.position
        if pos.phase is Phase.MAIL_REPLY:
            options: list[Reply | Mail] = {
                RequestCode.NEXTLETTER: [Reply(ResponseCode.MAILTIMEOUT), Mail("a.b", b"x")],
                RequestCode.SATIATED: [Reply(ResponseCode.REQGRANTED)],
            }.get(pos.loop_request, [Reply(ResponseCode.BADCOMMAND)])  # type: ignore[arg-type]
        else:
            allowed = sorted(allowed_replies(pos.request, pos.step) - ANYTIME)
            options = [Reply(r) for r in allowed]
        chosen = draw(st.sampled_from(options))
        server.send(chosen)
        replies.append(chosen)
        if server.closed:
            break
    return bytes(wire), events, replies


@SETTINGS
@given(conversations(), st.lists(st.integers(min_value=0), max_size=30), st.booleans())
def test_same_events_for_every_chunking(
    conversation: tuple[bytes, list[object], list[Reply | Mail]],
    cuts: list[int],
    byte_at_a_time: bool,
) -> None:
    wire, expected, replies = conversation
    chunks = [wire[i : i + 1] for i in range(len(wire))] if byte_at_a_time else split(wire, cuts)
    server = ServerProtocol()
    answers = iter(replies)
    events: list[object] = []
    for chunk in chunks:
        server.receive_data(chunk)
        while not server.closed:
            event = server.next_event()
            if event is NEED_DATA:
                break
            if event is PAUSED:
                server.send(next(answers))
                continue
            events.append(event)
    assert events == expected


@SETTINGS
@given(st.lists(st.integers(min_value=0), max_size=40))
def test_golden_conversation_in_any_chunking(cuts: list[int]) -> None:
    wire = b"".join(s.sent for s in CONVERSATION)
    server = ServerProtocol()
    answers = iter(CONVERSATION)
    events: list[object] = []
    for chunk in split(wire, cuts):
        server.receive_data(chunk)
        while not server.closed:
            event = server.next_event()
            if event is NEED_DATA:
                break
            if event is PAUSED:
                server.send(next(answers).reply)
                continue
            events.append(event)
    assert events == [f for s in CONVERSATION for f in s.frames]


# -- arbitrary bytes ---------------------------------------------------------------------
def scripted_reply(server: ServerProtocol) -> Reply | Mail:
    pos = server.position
    if pos.phase is Phase.MAIL_REPLY:
        if pos.loop_request is RequestCode.NEXTLETTER:
            return Mail("a.b", b"x")
        if pos.loop_request is RequestCode.SATIATED:
            return Reply(ResponseCode.REQGRANTED)
        return Reply(ResponseCode.BADCOMMAND)
    allowed = allowed_replies(pos.request, pos.step)
    if ResponseCode.REQDATA in allowed:
        return Reply(ResponseCode.REQDATA)
    return Reply(min(allowed - ANYTIME))


@SETTINGS
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0), max_size=20))
def test_arbitrary_bytes_to_the_server_only_give_events_or_protocol_errors(
    data: bytes, cuts: list[int]
) -> None:
    server = ServerProtocol(Limits(max_name_bytes=50, max_payload_bytes=500, max_buffer_bytes=800))
    try:
        for chunk in [*split(data, cuts), b""]:
            server.receive_data(chunk)
            while not server.closed:
                event = server.next_event()
                if event is NEED_DATA:
                    break
                if event is PAUSED:
                    server.send(scripted_reply(server))
                    continue
                assert isinstance(
                    event,
                    Command
                    | UnknownCommand
                    | Name
                    | Digest
                    | Payload
                    | Timeout
                    | InvalidName
                    | OversizedPayload
                    | EndOfStream,
                )
    except ProtocolError:
        pass


@SETTINGS
@given(
    st.sampled_from(list(RequestCode)),
    st.binary(max_size=600),
    st.lists(st.integers(min_value=0), max_size=10),
)
def test_arbitrary_bytes_to_the_client_only_give_events_or_protocol_errors(
    request: RequestCode, data: bytes, cuts: list[int]
) -> None:
    client = ClientProtocol(Limits(max_payload_bytes=300, max_buffer_bytes=800))
    client.send(Command(request))
    try:
        for chunk in [*split(data, cuts), b""]:
            client.receive_data(chunk)
            while True:
                event = client.next_event()
                if event in (NEED_DATA, PAUSED):
                    break
                assert isinstance(event, Reply | Mail | EndOfStream)
                if isinstance(event, EndOfStream):
                    break
    except ProtocolError:
        pass


# -- limits ------------------------------------------------------------------------------
def test_overlong_name_is_skipped_without_being_buffered_and_the_stream_stays_in_step() -> None:
    decoder = Decoder(Limits(max_name_bytes=10, max_buffer_bytes=64))
    decoder.feed(b"\xff\xff")  # announces 65535 bytes
    assert decoder.read(Field.NAME) is NEED_DATA
    for _ in range(1000):
        decoder.feed(b"x" * 65)  # more than max_buffer_bytes each time: never kept
        assert decoder.buffered == 0
    decoder.feed(b"x" * (65535 - 65000) + b"\x00\x03a.b")
    result = decoder.read(Field.NAME)
    assert isinstance(result, InvalidName) and "too long" in result.reason
    assert decoder.read(Field.NAME) == Name("a.b")


def test_oversized_payload_is_skipped_and_reported() -> None:
    decoder = Decoder(Limits(max_payload_bytes=4))
    decoder.feed(b"\x00\x00\x00\x08" + b"12345678" + b"\x00\x00\x00\x02ok")
    assert decoder.read(Field.PAYLOAD) == OversizedPayload(8)
    assert decoder.read(Field.PAYLOAD) == Payload(b"ok")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x00\x02\xc3\x28", "UTF-8"),
        (b"\x00\x03a..", "identifier"),
        (b"\x00\x04a b.", "identifier"),
        (b"\x00\x00", "identifier"),
        (b"\x00\x02\xc3\xa9", "identifier"),  # valid UTF-8, but not [a-zA-Z0-9]
    ],
)
def test_invalid_names_are_reported(raw: bytes, reason: str) -> None:
    decoder = Decoder()
    decoder.feed(raw)
    result = decoder.read(Field.NAME)
    assert isinstance(result, InvalidName) and reason in result.reason


def test_sending_far_ahead_is_a_limit_error() -> None:
    server = ServerProtocol(Limits(max_buffer_bytes=100))
    server.receive_data(b"\x02")
    assert server.next_event() == Command(RequestCode.CREATEBOX)
    with pytest.raises(LimitError):
        server.receive_data(b"\x00" * 200)  # paused until the clerk answers


def test_a_digest_must_be_sixteen_bytes() -> None:
    with pytest.raises(ValueError):
        Digest(b"short")
    assert "00" not in repr(Digest(bytes(16)))  # secrets never reach a repr


def test_client_state_machine_refuses_frames_out_of_order() -> None:
    client = ClientProtocol()
    with pytest.raises(ProtocolError):
        client.send(Name("a.b"))
    client.send(Command(RequestCode.RETBOX))
    with pytest.raises(ProtocolError):
        client.send(Command(RequestCode.RETBOX))  # its reply can end it: no pipelining


# -- both roles together ------------------------------------------------------------------
REQUEST_DATA = {
    RequestCode.CREATEBOX: [Field.NAME, Field.DIGEST],
    RequestCode.REQBOX: [Field.NAME, Field.DIGEST],
    RequestCode.SENDLETTER: [Field.NAME, Field.PAYLOAD],
    RequestCode.GETMAIL: [Field.TIMEOUT],
}


@SETTINGS
@given(st.data())
def test_client_and_server_machines_agree_on_every_conversation(data: st.DataObject) -> None:
    """Whatever the client sends the server decodes as sent, whatever the server answers
    (among what it may) the client decodes as answered, and both agree when a request
    is over."""
    client, server = ClientProtocol(), ServerProtocol()
    frames_for = {
        Field.NAME: lambda: Name(data.draw(identifiers)),
        Field.DIGEST: lambda: Digest(data.draw(digests)),
        Field.PAYLOAD: lambda: Payload(data.draw(payloads)),
        Field.TIMEOUT: lambda: Timeout(data.draw(timeouts)),
    }

    def exchange(frame: Any) -> Reply | Mail:
        server.receive_data(client.send(frame))
        decoded = server.next_event()
        assert decoded == frame
        pos = server.position
        if pos.phase is Phase.MAIL_REPLY:
            options: list[Reply | Mail] = {
                RequestCode.NEXTLETTER: [Reply(ResponseCode.MAILTIMEOUT), Mail("a.b", b"letter")],
                RequestCode.SATIATED: [Reply(ResponseCode.REQGRANTED)],
            }[pos.loop_request]  # type: ignore[index]
        else:
            allowed = allowed_replies(pos.request, pos.step) - ANYTIME
            options = [Reply(r) for r in sorted(allowed)]
        answer = data.draw(st.sampled_from(options))
        client.receive_data(server.send(answer))
        assert client.next_event() == answer
        return answer

    for _ in range(data.draw(st.integers(min_value=1, max_value=8))):
        request = data.draw(st.sampled_from([r for r in RequestCode if r not in (6, 7)]))
        answer = exchange(Command(request))
        for field in REQUEST_DATA.get(request, []):
            if answer != Reply(ResponseCode.REQDATA):
                break
            answer = exchange(frames_for[field]())
        if request is RequestCode.GETMAIL and answer == Reply(ResponseCode.REQDATA):
            for _ in range(data.draw(st.integers(min_value=0, max_value=3))):
                if exchange(Command(RequestCode.NEXTLETTER)) == Reply(ResponseCode.MAILTIMEOUT):
                    break
            else:
                exchange(Command(RequestCode.SATIATED))
        if server.closed:
            assert client.closed
            break
        assert client.idle and server.position.phase is Phase.IDLE
