"""Bodies that do not decode are malformed, never delivered changed."""

from __future__ import annotations

import mailbus
import pytest
from mailbus import Kind
from mailbus.email_message import from_bytes
from mailbus.errors import EmailFormatError
from mailbus.inprocess import InProcessReceiver
from mailbus.trace import TraceEvent

HEAD = (
    "Subject: t\r\nSource-Timestamp: 1\r\nPublisher-GID: g\r\nMessage-ID: <m@x>\r\n"
    "MIME-Version: 1.0\r\n"
)


def _email(encoding: str, body: bytes, charset: str = "utf-8") -> bytes:
    return (
        HEAD + f"Content-Type: text/plain; charset={charset}\r\n"
        f"Content-Transfer-Encoding: {encoding}\r\n\r\n"
    ).encode() + body


MALFORMED = [
    ("base64 with foreign characters", _email("base64", b"aGVs**bG8=\r\n"), "base64"),
    ("base64 of nothing valid", _email("base64", b"!!!\r\n"), "base64"),
    ("base64 with bad padding", _email("base64", b"aGVsbG8\r\n"), "base64"),
    ("quoted-printable bad escape", _email("quoted-printable", b"caf=ZZ\r\n"), "quoted"),
    ("bytes invalid in the charset", _email("8bit", b"caf\xe9\r\n"), "utf-8"),
    ("an unknown charset", _email("7bit", b"x\r\n", charset="x-klingon"), "charset"),
]


@pytest.mark.parametrize(("what", "raw", "named"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_an_undecodable_body_is_an_error(what: str, raw: bytes, named: str) -> None:
    with pytest.raises(EmailFormatError, match=named):
        from_bytes(raw)


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (_email("base64", b"aGVs\r\nbG8=\r\n"), "hello"),  # line breaks inside are fine
        (_email("quoted-printable", b"caf=C3=A9 =\r\nsoft\r\n"), "café soft"),
        (_email("quoted-printable", b"ends with a soft break=\r\n"), "ends with a soft break"),
    ],
)
def test_valid_encodings_still_decode(raw: bytes, body: str) -> None:
    assert from_bytes(raw).body == body


def test_a_malformed_body_is_skipped_and_reported(
    ctx: mailbus.Context, events: list[TraceEvent]
) -> None:
    sub = ctx.subscription("t")
    receiver = ctx.transport.receiver
    assert isinstance(receiver, InProcessReceiver)
    receiver.push_raw(_email("base64", b"aGVs**bG8=\r\n"), origin="uid:3")
    ctx.publisher("t").publish("after")
    message = mailbus.wait_for_message(sub, 1.0)
    assert message is not None and message.body == "after"
    assert sub.take() is None  # 'hello' was never delivered
    skipped = [e for e in events if e.kind == Kind.SKIPPED]
    assert len(skipped) == 1 and skipped[0].detail.startswith("malformed: body is not valid base64")
    assert ctx.counters["malformed"] == 1
