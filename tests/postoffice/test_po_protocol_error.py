"""The protocol machines break for good on a violation (h11's ERROR state), refuse data
after the end of the stream, and read a letter through explicit states; byte by byte."""

from __future__ import annotations

import pytest
from mailbus.postoffice.protocol import (
    ClientProtocol,
    Command,
    EndOfStream,
    LimitError,
    Limits,
    Mail,
    Phase,
    ProtocolError,
    Reply,
    RequestCode,
    ResponseCode,
    ServerProtocol,
    StateError,
    Timeout,
)

GETMAIL = bytes((RequestCode.GETMAIL,))
NEXTLETTER = bytes((RequestCode.NEXTLETTER,))


def test_a_refused_answer_puts_the_server_in_error_for_good() -> None:
    server = ServerProtocol()
    server.receive_data(bytes((RequestCode.RETBOX,)))
    assert server.next_event() == Command(RequestCode.RETBOX)
    with pytest.raises(StateError, match="MAILTIMEOUT is not a reply"):
        server.reply(ResponseCode.MAILTIMEOUT)
    assert server.position.phase is Phase.ERROR
    # The answer that would have been right is refused now, and so is everything else.
    with pytest.raises(StateError, match="in ERROR since: MAILTIMEOUT is not a reply"):
        server.reply(ResponseCode.REQGRANTED)
    with pytest.raises(StateError, match="in ERROR"):
        server.send(Reply(ResponseCode.SHUTDOWN))  # even an answer allowed anywhere
    with pytest.raises(StateError, match="in ERROR"):
        server.next_event()
    with pytest.raises(StateError, match="in ERROR"):
        server.receive_data(bytes((RequestCode.DISCONNECT,)))
    with pytest.raises(StateError, match="in ERROR"):
        server.receive_data(b"")
    assert server.position.phase is Phase.ERROR and not server.closed


def test_send_of_a_frame_breaks_the_server_like_reply() -> None:
    server = ServerProtocol()
    with pytest.raises(StateError, match="no reply is due"):
        server.send(Mail("a.b", b"letter"))  # nothing was asked
    assert server.position.phase is Phase.ERROR
    with pytest.raises(StateError, match="in ERROR"):
        server.send(Reply(ResponseCode.BADCOMMAND))


def test_input_over_the_limit_breaks_the_server() -> None:
    server = ServerProtocol(Limits(max_buffer_bytes=4))
    with pytest.raises(LimitError):
        server.receive_data(b"\x00" * 5)
    assert server.position.phase is Phase.ERROR
    with pytest.raises(StateError, match="in ERROR since: more than 4 bytes"):
        server.next_event()


def test_data_after_the_end_of_the_stream_is_an_error_on_the_server() -> None:
    server = ServerProtocol()
    server.receive_data(b"")
    with pytest.raises(ProtocolError, match="after the end of the stream"):
        server.receive_data(bytes((RequestCode.DISCONNECT,)))
    assert server.position.phase is Phase.ERROR
    with pytest.raises(StateError, match="in ERROR"):
        server.next_event()  # the byte was not taken as a request


def test_the_end_of_the_stream_alone_still_ends_the_conversation() -> None:
    server = ServerProtocol()
    server.receive_data(bytes((RequestCode.DISCONNECT,)))
    server.receive_data(b"")
    server.receive_data(b"")  # said twice: still the end, not an error
    assert server.next_event() == Command(RequestCode.DISCONNECT)
    assert server.reply(ResponseCode.REQGRANTED) == bytes((ResponseCode.REQGRANTED,))
    assert server.closed


def test_data_after_the_end_of_the_stream_is_an_error_on_the_client() -> None:
    client = ClientProtocol()
    client.send(Command(RequestCode.RETBOX))
    client.receive_data(b"")
    with pytest.raises(ProtocolError, match="after the end of the stream"):
        client.receive_data(bytes((ResponseCode.REQGRANTED,)))
    assert client.next_event() == EndOfStream(True)  # the late byte was never read


def test_the_client_reads_a_letter_through_explicit_states() -> None:
    client = ClientProtocol()
    client.send(Command(RequestCode.GETMAIL))
    client.receive_data(bytes((ResponseCode.REQDATA,)))
    assert client.next_event() == Reply(ResponseCode.REQDATA)
    client.send(Timeout(1000))
    client.receive_data(bytes((ResponseCode.REQDATA,)))
    assert client.next_event() == Reply(ResponseCode.REQDATA)
    assert client.position.phase is Phase.MAIL_LOOP
    client.send(Command(RequestCode.NEXTLETTER))
    assert client.position.phase is Phase.MAIL_REPLY
    letter = bytes((ResponseCode.INMAIL,)) + b"\x00\x03a.b" + b"\x00\x00\x00\x02hi"
    seen = []
    for byte in letter:
        client.receive_data(bytes((byte,)))
        event = client.next_event()
        seen.append(client.position.phase)
        if byte is letter[-1]:
            assert event == Mail("a.b", b"hi")
    # The code, then the sender's 5 bytes, then the payload's 6 bytes.
    assert seen == [
        *[Phase.MAIL_SENDER] * 5,
        *[Phase.MAIL_PAYLOAD] * 6,
        Phase.MAIL_LOOP,
    ]
    client.send(Command(RequestCode.SATIATED))
    client.receive_data(bytes((ResponseCode.REQGRANTED,)))
    assert client.next_event() == Reply(ResponseCode.REQGRANTED)
    assert client.idle and client.position.phase is Phase.IDLE
