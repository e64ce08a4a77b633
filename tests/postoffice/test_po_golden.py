"""Golden byte vectors (tests/postoffice/golden.py, written from ERRATA.md) checked
against the encoder, both state machines, and the running daemon."""

from __future__ import annotations

import pytest
from mailbus.postoffice.protocol import (
    NEED_DATA,
    PAUSED,
    ClientProtocol,
    Command,
    EndOfStream,
    Mail,
    Reply,
    RequestCode,
    ResponseCode,
    ServerProtocol,
    StateError,
    UnknownCommand,
    encode,
)

from .conftest import Daemon
from .golden import CONVERSATION

ERRATA_REQUESTS = {
    "REQBOX": 0,
    "RETBOX": 1,
    "CREATEBOX": 2,
    "REMOVEBOX": 3,
    "SENDLETTER": 4,
    "GETMAIL": 5,
    "NEXTLETTER": 6,
    "SATIATED": 7,
    "EMPTYBOX": 8,
    "DISCONNECT": 9,
}
ERRATA_RESPONSES = {
    "REQGRANTED": 0,
    "REQDATA": 1,
    "NOAUTH": 2,
    "BADCOMMAND": 3,
    "ALREADYCONN": 4,
    "MAILTIMEOUT": 5,
    "BOXEXISTS": 6,
    "NONEXISTBOX": 7,
    "NOBOXCONN": 8,
    "BOXINUSE": 9,
    "DELFAIL": 10,
    "SHUTDOWN": 11,
    "COMMTIMEOUT": 12,
    "INMAIL": 13,
    "UNSUPPORTED": 14,
}


def test_codes_are_the_errata_values() -> None:
    assert {r.name: int(r) for r in RequestCode} == ERRATA_REQUESTS
    assert {r.name: int(r) for r in ResponseCode} == ERRATA_RESPONSES
    assert "NOMAIL" not in ResponseCode.__members__


def test_encoder_writes_the_golden_bytes() -> None:
    for step in CONVERSATION:
        frames = [f for f in step.frames if not isinstance(f, UnknownCommand)]
        if len(frames) == len(step.frames):
            assert b"".join(encode(f) for f in frames) == step.sent, step  # type: ignore[arg-type]
        assert encode(step.reply) == step.answer, step


def test_server_protocol_decodes_and_answers_the_golden_conversation() -> None:
    proto = ServerProtocol()
    out = bytearray()
    for step in CONVERSATION:
        proto.receive_data(step.sent)
        events = []
        while (event := proto.next_event()) not in (NEED_DATA, PAUSED):
            events.append(event)
        assert tuple(events) == step.frames, step
        out += proto.send(step.reply)
    assert bytes(out) == b"".join(s.answer for s in CONVERSATION)
    assert proto.closed  # after DISCONNECT


def test_server_protocol_takes_the_whole_conversation_one_byte_at_a_time() -> None:
    proto = ServerProtocol()
    wire = b"".join(s.sent for s in CONVERSATION)
    replies = iter(CONVERSATION)
    events = []
    for i in range(len(wire)):
        proto.receive_data(wire[i : i + 1])
        while True:
            event = proto.next_event()
            if event is NEED_DATA or proto.closed:
                break
            if event is PAUSED:
                proto.send(next(replies).reply)
                continue
            events.append(event)
    assert tuple(events) == tuple(f for s in CONVERSATION for f in s.frames)


def test_client_protocol_sends_and_reads_the_golden_conversation() -> None:
    proto = ClientProtocol()
    for step in CONVERSATION:
        if any(isinstance(f, UnknownCommand) for f in step.frames):
            continue  # a client never sends an unknown code
        assert b"".join(proto.send(f) for f in step.frames) == step.sent  # type: ignore[arg-type]
        proto.receive_data(step.answer)
        assert proto.next_event() == step.reply, step
        if step.reply == Reply(ResponseCode.REQGRANTED) and step.frames == (
            Command(RequestCode.DISCONNECT),
        ):
            break
    assert proto.next_event() is PAUSED


def test_client_protocol_pipelines_a_letter_and_reads_the_three_replies() -> None:
    proto = ClientProtocol()
    # Hold a box first (REQBOX, name, password, REQGRANTED), one step at a time.
    for step in CONVERSATION[24:27]:
        proto.send(step.frames[0])  # type: ignore[arg-type]
        proto.receive_data(step.answer)
        assert proto.next_event() == step.reply
    sent = b"".join(proto.send(s.frames[0]) for s in CONVERSATION[28:31])  # type: ignore[arg-type]
    assert sent == b"\x04\x00\x03a.c\x00\x00\x00\x05hello"
    proto.receive_data(b"\x01\x01\x00")
    assert [proto.next_event() for _ in range(3)] == [
        Reply(ResponseCode.REQDATA),
        Reply(ResponseCode.REQDATA),
        Reply(ResponseCode.REQGRANTED),
    ]
    assert proto.idle


def test_client_protocol_rejects_an_early_end_while_frames_are_in_flight() -> None:
    proto = ClientProtocol()
    proto.send(Command(RequestCode.SENDLETTER))
    proto.send(CONVERSATION[29].frames[0])  # type: ignore[arg-type]
    proto.receive_data(b"\x08")  # NOBOXCONN while the name is already on its way
    with pytest.raises(StateError):
        proto.next_event()


def test_client_protocol_rejects_replies_the_sequence_does_not_allow() -> None:
    proto = ClientProtocol()
    proto.send(Command(RequestCode.RETBOX))
    proto.receive_data(b"\x06")  # BOXEXISTS is no answer to RETBOX
    with pytest.raises(StateError):
        proto.next_event()


def test_client_protocol_accepts_unasked_shutdown() -> None:
    proto = ClientProtocol()
    proto.receive_data(b"\x0b")
    assert proto.next_event() == Reply(ResponseCode.SHUTDOWN)
    assert proto.closed


def test_mail_frame_bytes() -> None:
    assert encode(Mail("x", b"")) == b"\x0d\x00\x01x\x00\x00\x00\x00"


def test_golden_conversation_against_the_daemon(daemon: Daemon) -> None:
    raw = daemon.raw()
    try:
        for step in CONVERSATION:
            raw.exchange(step.sent, step.answer)
        assert raw.at_eof()  # DISCONNECT closes the connection
    finally:
        raw.close()


def test_golden_conversation_pipelined_in_one_write_per_request(daemon: Daemon) -> None:
    """A client may send a request's steps without waiting for each REQDATA when it
    knows they will come; the daemon reads them in order all the same."""
    raw = daemon.raw()
    try:
        for step in CONVERSATION[9:12]:  # CREATEBOX a.b, in one write
            raw.send(step.sent)
        assert raw.recv_exactly(3) == b"\x01\x01\x00"
    finally:
        raw.close()


def test_box_in_use_and_end_of_stream(daemon: Daemon) -> None:
    first, second = daemon.raw(), daemon.raw()
    try:
        for step in CONVERSATION[9:12]:
            first.exchange(step.sent, step.answer)
        for step in CONVERSATION[24:27]:  # REQBOX a.b with the right password
            first.exchange(step.sent, step.answer)
        second.exchange(b"\x00", b"\x01")
        second.exchange(b"\x00\x03a.b", b"\x01")
        second.exchange(CONVERSATION[26].sent, b"\x09")  # BOXINUSE
    finally:
        first.close()
        second.close()


def test_server_reports_end_of_stream_mid_command() -> None:
    proto = ServerProtocol()
    proto.receive_data(b"\x02")
    assert proto.next_event() == Command(RequestCode.CREATEBOX)
    proto.send(Reply(ResponseCode.REQDATA))
    proto.receive_data(b"\x00\x05a.")  # half a name
    assert proto.next_event() is NEED_DATA
    proto.receive_data(b"")
    assert proto.next_event() == EndOfStream(mid_command=True)
