"""Numeric metadata headers are read strictly: ASCII digits within the signed 64-bit
range, or the email is foreign with a reason that names the header."""

from __future__ import annotations

import mailbus
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus import Kind
from mailbus.email_message import Email, to_bytes
from mailbus.headers import INT64_MAX, parse_number
from mailbus.inprocess import InProcessReceiver
from mailbus.trace import TraceEvent

REFUSED = [
    "1" + "0" * 30,  # the value that killed a recording
    "10" * 50,
    str(INT64_MAX + 1),
    "-5",
    "+7",
    " +7 ",
    " 7",
    "7 ",
    "1_000",
    "١٢٣",  # Arabic-Indic digits: int() reads 123
    "²",  # isdigit() but not int()
    "0x10",
    "1e3",
    "",
]


@pytest.mark.parametrize("value", REFUSED)
def test_anything_but_plain_ascii_digits_in_range_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="Source-Timestamp"):
        parse_number("Source-Timestamp", value)


@given(st.integers(min_value=0, max_value=INT64_MAX))
def test_every_number_mailbus_writes_reads_back(number: int) -> None:
    assert parse_number("Request-Sequence-Number", str(number)) == number


@given(st.text(max_size=40))
def test_any_text_is_a_number_in_range_or_a_clear_refusal(value: str) -> None:
    try:
        number = parse_number("Source-Timestamp", value)
    except ValueError as exc:
        assert "Source-Timestamp" in str(exc)
        assert not (value.isascii() and value.isdigit() and int(value) <= INT64_MAX) or (
            len(value) > 19
        )
    else:
        assert value.isascii() and value.isdigit()
        assert 0 <= number <= INT64_MAX and number == int(value)


def _raw(subject: str, **headers: str) -> bytes:
    fields = {key.replace("_", "-"): value for key, value in headers.items()}
    return to_bytes(Email(subject=subject, body="b", headers=fields))


@pytest.mark.parametrize(
    ("header", "headers"),
    [
        ("Source-Timestamp", {"Source_Timestamp": "1" + "0" * 30, "Publisher_GID": "g"}),
        ("Source-Timestamp", {"Source_Timestamp": "١٢٣", "Publisher_GID": "g"}),
        ("Source-Timestamp", {"Source_Timestamp": "-5", "Publisher_GID": "g"}),
        (
            "Publisher-Sequence-Number",
            {"Source_Timestamp": "1", "Publisher_GID": "g", "Publisher_Sequence_Number": "1_000"},
        ),
        (
            "Request-Sequence-Number",
            {"Source_Timestamp": "1", "Client_GID": "c", "Request_Sequence_Number": "1" + "0" * 30},
        ),
    ],
)
def test_an_email_with_a_bad_number_is_foreign_and_the_stream_goes_on(
    ctx: mailbus.Context, events: list[TraceEvent], header: str, headers: dict[str, str]
) -> None:
    sub, server = ctx.subscription("t"), ctx.server("t")
    receiver = ctx.transport.receiver
    assert isinstance(receiver, InProcessReceiver)
    receiver.push_raw(_raw("t", **headers), origin="uid:1")
    ctx.publisher("t").publish("after")
    message = mailbus.wait_for_message(sub, 1.0)
    assert message is not None and message.body == "after"
    assert server.take_request() is None  # no request with an absurd sequence number got through
    skipped = [e for e in events if e.kind == Kind.SKIPPED]
    assert len(skipped) == 1 and header in skipped[0].detail
    assert ctx.counters["foreign"] == 1
