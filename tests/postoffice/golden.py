"""Golden conversations written by hand from ERRATA.md (codes and sequences), never
produced by our encoder. Each step: the frames the client sends, their bytes, the
frame the server answers and its bytes.

Codes (ERRATA): requests REQBOX 0, RETBOX 1, CREATEBOX 2, REMOVEBOX 3, SENDLETTER 4,
GETMAIL 5, NEXTLETTER 6, SATIATED 7, EMPTYBOX 8, DISCONNECT 9; responses REQGRANTED 0,
REQDATA 1, NOAUTH 2, BADCOMMAND 3, ALREADYCONN 4, MAILTIMEOUT 5, BOXEXISTS 6,
NONEXISTBOX 7, NOBOXCONN 8, BOXINUSE 9, DELFAIL 10, SHUTDOWN 11, COMMTIMEOUT 12,
INMAIL 13, UNSUPPORTED 14. Strings: u16 BE byte length + UTF-8; binary: u32 BE length +
bytes; timeouts: i32 BE milliseconds; passwords: 16 raw bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mailbus.postoffice.protocol import (
    Command,
    Digest,
    Mail,
    Name,
    Payload,
    Reply,
    RequestCode,
    ResponseCode,
    Timeout,
    UnknownCommand,
)

GOOD = b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
BAD = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
R = RequestCode
S = ResponseCode


@dataclass(frozen=True)
class Step:
    frames: tuple[object, ...]
    sent: bytes
    reply: Reply | Mail
    answer: bytes


def step(frames: object, sent: bytes, reply: Reply | Mail, answer: bytes) -> Step:
    if not isinstance(frames, tuple):
        frames = (frames,)
    return Step(frames, sent, reply, answer)


def cmd(request: RequestCode) -> Command:
    return Command(request)


def reply(response: ResponseCode) -> Reply:
    return Reply(response)


# One connection, from nothing to DISCONNECT, through every request and most refusals.
CONVERSATION: list[Step] = [
    # Requests that need a box, without one: NOBOXCONN (8).
    step(cmd(R.RETBOX), b"\x01", reply(S.NOBOXCONN), b"\x08"),
    step(cmd(R.SENDLETTER), b"\x04", reply(S.NOBOXCONN), b"\x08"),
    step(cmd(R.GETMAIL), b"\x05", reply(S.NOBOXCONN), b"\x08"),
    step(cmd(R.EMPTYBOX), b"\x08", reply(S.NOBOXCONN), b"\x08"),
    step(cmd(R.REMOVEBOX), b"\x03", reply(S.NOBOXCONN), b"\x08"),
    # Out-of-place and unknown codes: BADCOMMAND (3).
    step(cmd(R.NEXTLETTER), b"\x06", reply(S.BADCOMMAND), b"\x03"),
    step(cmd(R.SATIATED), b"\x07", reply(S.BADCOMMAND), b"\x03"),
    step(UnknownCommand(10), b"\x0a", reply(S.BADCOMMAND), b"\x03"),
    step(UnknownCommand(255), b"\xff", reply(S.BADCOMMAND), b"\x03"),
    # CREATEBOX a.b: REQDATA, name, REQDATA, password, REQGRANTED.
    step(cmd(R.CREATEBOX), b"\x02", reply(S.REQDATA), b"\x01"),
    step(Name("a.b"), b"\x00\x03a.b", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.REQGRANTED), b"\x00"),
    # Again: BOXEXISTS (6).
    step(cmd(R.CREATEBOX), b"\x02", reply(S.REQDATA), b"\x01"),
    step(Name("a.b"), b"\x00\x03a.b", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.BOXEXISTS), b"\x06"),
    # CREATEBOX a.c.
    step(cmd(R.CREATEBOX), b"\x02", reply(S.REQDATA), b"\x01"),
    step(Name("a.c"), b"\x00\x03a.c", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.REQGRANTED), b"\x00"),
    # REQBOX of a box that does not exist: NONEXISTBOX (7).
    step(cmd(R.REQBOX), b"\x00", reply(S.REQDATA), b"\x01"),
    step(Name("a.x"), b"\x00\x03a.x", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.NONEXISTBOX), b"\x07"),
    # Wrong password: NOAUTH (2).
    step(cmd(R.REQBOX), b"\x00", reply(S.REQDATA), b"\x01"),
    step(Name("a.b"), b"\x00\x03a.b", reply(S.REQDATA), b"\x01"),
    step(Digest(BAD), BAD, reply(S.NOAUTH), b"\x02"),
    # Right password: REQGRANTED.
    step(cmd(R.REQBOX), b"\x00", reply(S.REQDATA), b"\x01"),
    step(Name("a.b"), b"\x00\x03a.b", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.REQGRANTED), b"\x00"),
    # A second REQBOX while holding one: ALREADYCONN (4), no data asked.
    step(cmd(R.REQBOX), b"\x00", reply(S.ALREADYCONN), b"\x04"),
    # SENDLETTER "hello" to a.c.
    step(cmd(R.SENDLETTER), b"\x04", reply(S.REQDATA), b"\x01"),
    step(Name("a.c"), b"\x00\x03a.c", reply(S.REQDATA), b"\x01"),
    step(Payload(b"hello"), b"\x00\x00\x00\x05hello", reply(S.REQGRANTED), b"\x00"),
    # To a box that does not exist: DELFAIL (10).
    step(cmd(R.SENDLETTER), b"\x04", reply(S.REQDATA), b"\x01"),
    step(Name("a.zz"), b"\x00\x04a.zz", reply(S.REQDATA), b"\x01"),
    step(Payload(b"lost"), b"\x00\x00\x00\x04lost", reply(S.DELFAIL), b"\x0a"),
    # To itself, a payload that is not ASCII (byte counts, not characters).
    step(cmd(R.SENDLETTER), b"\x04", reply(S.REQDATA), b"\x01"),
    step(Name("a.b"), b"\x00\x03a.b", reply(S.REQDATA), b"\x01"),
    step(Payload("é".encode()), b"\x00\x00\x00\x02\xc3\xa9", reply(S.REQGRANTED), b"\x00"),
    # GETMAIL with timeout 0 and mail waiting: REQDATA, then INMAIL + sender + payload.
    step(cmd(R.GETMAIL), b"\x05", reply(S.REQDATA), b"\x01"),
    step(Timeout(0), b"\x00\x00\x00\x00", reply(S.REQDATA), b"\x01"),
    step(
        cmd(R.NEXTLETTER),
        b"\x06",
        Mail("a.b", "é".encode()),
        b"\x0d\x00\x03a.b\x00\x00\x00\x02\xc3\xa9",
    ),
    step(cmd(R.NEXTLETTER), b"\x06", reply(S.MAILTIMEOUT), b"\x05"),
    # GETMAIL with timeout 0 and nothing waiting: MAILTIMEOUT (5) at once.
    step(cmd(R.GETMAIL), b"\x05", reply(S.REQDATA), b"\x01"),
    step(Timeout(0), b"\x00\x00\x00\x00", reply(S.MAILTIMEOUT), b"\x05"),
    step(cmd(R.EMPTYBOX), b"\x08", reply(S.REQGRANTED), b"\x00"),
    step(cmd(R.RETBOX), b"\x01", reply(S.REQGRANTED), b"\x00"),
    # Check out a.c, take "hello" within 1000 ms, a stray code inside the loop, SATIATED.
    step(cmd(R.REQBOX), b"\x00", reply(S.REQDATA), b"\x01"),
    step(Name("a.c"), b"\x00\x03a.c", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.REQGRANTED), b"\x00"),
    step(cmd(R.GETMAIL), b"\x05", reply(S.REQDATA), b"\x01"),
    step(Timeout(1000), b"\x00\x00\x03\xe8", reply(S.REQDATA), b"\x01"),
    step(
        cmd(R.NEXTLETTER),
        b"\x06",
        Mail("a.b", b"hello"),
        b"\x0d\x00\x03a.b\x00\x00\x00\x05hello",
    ),
    step(UnknownCommand(14), b"\x0e", reply(S.BADCOMMAND), b"\x03"),
    step(cmd(R.SATIATED), b"\x07", reply(S.REQGRANTED), b"\x00"),
    # REMOVEBOX removes the checked-out box; checking it out again: NONEXISTBOX.
    step(cmd(R.REMOVEBOX), b"\x03", reply(S.REQGRANTED), b"\x00"),
    step(cmd(R.REQBOX), b"\x00", reply(S.REQDATA), b"\x01"),
    step(Name("a.c"), b"\x00\x03a.c", reply(S.REQDATA), b"\x01"),
    step(Digest(GOOD), GOOD, reply(S.NONEXISTBOX), b"\x07"),
    # DISCONNECT: REQGRANTED, then the server closes.
    step(cmd(R.DISCONNECT), b"\x09", reply(S.REQGRANTED), b"\x00"),
]
