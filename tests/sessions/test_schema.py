"""Body capping and redaction, the two rules every recorded row goes through."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings
from mailbus.sessions.schema import REDACTED, Redactor, arrow_schema, cap_body


@settings(max_examples=60)
@given(st.text(), st.integers(0, 64))
def test_cap_body_is_a_utf8_prefix_within_the_cap(body: str, cap: int) -> None:
    data, size, cut = cap_body(body, cap)
    full = body.encode("utf-8", "surrogatepass")
    assert size == len(full)
    assert len(data) <= cap or not cut
    assert full.startswith(data)
    assert cut == (len(data) < len(full))
    if not any("\ud800" <= c <= "\udfff" for c in body):
        data.decode("utf-8")  # never half a character
    if not cut:
        assert data == full


def test_cap_body_examples() -> None:
    assert cap_body("abc", 2) == (b"ab", 3, True)
    assert cap_body("é" * 3, 3) == ("é".encode(), 6, True)
    assert cap_body("", 0) == (b"", 0, False)


def test_redactor_rules() -> None:
    r = Redactor(["s3cret!"])
    assert r.text("imap://alice:pw@mail.example.org/INBOX") == (
        f"imap://alice:{REDACTED}@mail.example.org/INBOX"
    )
    assert r.text("connect password=abc, user=bob") == f"connect password={REDACTED}, user=bob"
    assert r.text("my s3cret! here") == f"my {REDACTED} here"
    assert r.text("plain value 12:30") == "plain value 12:30"
    assert dict(r.headers({"X-Api-Key": "k", "Authorization": "Basic x", "Topic": "t"})) == {
        "X-Api-Key": REDACTED,
        "Authorization": REDACTED,
        "Topic": "t",
    }
    assert r.body(b"a s3cret! b") == f"a {REDACTED} b".encode()
    # A replacement that spells the secret again leaves only the marker.
    tricky = Redactor(["d]xx"])
    assert "d]xx" not in tricky.text("d]xxxx") and "d]xx" not in tricky.text("ad]xxd]xx")
    assert Redactor().body(b"untouched") == b"untouched"
    # One secret inside another: the longer goes first, nothing of it is left.
    nested = Redactor(["k3y", "0ffice-k3y-9"])
    assert nested.text("use 0ffice-k3y-9 now") == f"use {REDACTED} now"
    assert nested.body(b"0ffice-k3y-9") == REDACTED.encode()


@settings(max_examples=60)
@given(st.text(min_size=4, alphabet=st.characters(codec="utf-8")), st.text(), st.text())
def test_a_configured_secret_never_survives(secret: str, before: str, after: str) -> None:
    r = Redactor([secret])
    value = before + secret + after
    assert secret not in r.text(value)
    assert secret.encode() not in r.body(value.encode())


def test_schema_carries_its_version() -> None:
    schema = arrow_schema("9.9")
    assert schema.metadata[b"mailbus.sessions.schema_version"] == b"1"
    assert schema.metadata[b"mailbus.sessions.engine_version"] == b"9.9"
    assert schema.names[:3] == ["event_index", "kind", "recorded_ns"]
