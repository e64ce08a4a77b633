"""One header-length rule on both sides: whatever publish() accepts,
every receiver parses back exactly; whatever a receiver would drop, publish() refuses,
on every transport including in-process."""

from __future__ import annotations

import mailbus
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.email_message import MAX_HEADER_VALUE, Email, from_bytes, to_bytes, validate
from mailbus.errors import EmailFormatError, InvalidNameError


@settings(max_examples=60, deadline=None)
@given(unit=st.sampled_from(["a", "é", "日本", "😀", "a é", "=?x?="]), count=st.integers(1, 7000))
def test_what_publish_accepts_every_receiver_reads_back(unit: str, count: int) -> None:
    value = unit * count
    email = Email(subject="t", body="b", headers={"Source-Timestamp": "1", "Note": value})
    try:
        validate(email)
    except InvalidNameError as exc:
        assert "Note" in str(exc)
        return
    assert from_bytes(to_bytes(email)).headers["Note"] == value


def test_the_issue_header_is_refused_at_publish_on_the_in_process_transport() -> None:
    with mailbus.Context() as ctx, pytest.raises(InvalidNameError, match="encoded for the wire"):
        ctx.publisher("t").publish("x", headers={"Note": "é" * 3000})


def test_a_receiver_drops_an_over_long_plain_header_from_a_foreign_sender() -> None:
    raw = (
        f"Subject: t\r\nSource-Timestamp: 1\r\nPublisher-GID: g\r\n"
        f"Note: {'a' * (MAX_HEADER_VALUE + 1)}\r\n\r\nbody"
    ).encode()
    with pytest.raises(EmailFormatError, match="longer than"):
        from_bytes(raw)
