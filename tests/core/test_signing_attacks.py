"""The signature gate tried as an attacker would, byte by byte: a header smuggled behind
a bare CR, a header block that two parsers read differently, SHA-1 signatures, a body
padded to make verification expensive, and a replay window overflowed on purpose.
Each attack goes through `PollingManager.dispatch` with `require-signature = true`
(the over-PostOffice twins are in tests/postoffice/test_po_signing_attacks.py)."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import dkim
import pytest
from mailbus import headers as H
from mailbus.options import options_from_mapping
from mailbus.signing.gate import SignatureGate
from mailbus.signing.keys import PrivateKey, new_ed25519_key
from mailbus.signing.replay import ReplayGuard
from mailbus.signing.verify import Verifier, without_trailing_blank_lines
from mailbus.trace import Kind
from mailbus.transport import RawEmail
from test_signing import DOMAIN, NAME, SELECTOR, mailbus_email, rsa_key, signed
from test_signing_gate import dispatcher

__all__ = ["rsa_key"]  # a fixture shared with test_signing


@pytest.fixture(scope="module")
def ed_key() -> tuple[PrivateKey, str]:
    return new_ed25519_key()


def smuggled_prefix(now_ns: int, extra: bytes = b"") -> bytes:
    """One unsigned header whose value hides a forged header block behind bare CRs:
    dkimpy reads one X-Note line, the stdlib parser reads a Subject, From and the rest."""
    return (
        b"X-Note: hi\r"
        b"Subject: lab/reactor/shutdown\r"
        b"From: safety@mailbus.test\r"
        b"Message-ID: <forged-" + str(now_ns).encode() + b"@mailbus.test>\r"
        b"Source-Timestamp: " + str(now_ns).encode() + b"\r"
        b"Publisher-GID: 00000000deadbeef\r" + extra + b"\r\n"
    )


def gate(tmp_path: Path, record: str, **signing: Any) -> SignatureGate:
    table: dict[str, Any] = {"require-signature": True, "keyring": {NAME: record}}
    table.update(signing)
    found = SignatureGate.from_sections(options_from_mapping({"signing": table}).sections)
    assert found is not None
    return found


def skipped(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.extra["reason"], e.detail) for e in events if e.kind == Kind.SKIPPED]


# -- header smuggling ---------------------------------------------------------------------


def test_a_header_block_smuggled_behind_bare_crs_is_refused(tmp_path: Path, ed_key: Any) -> None:
    key, record = ed_key
    _, good = signed(key)
    now = time.time_ns()
    forged = smuggled_prefix(now) + good
    the_gate = gate(tmp_path, record)
    dispatch, delivered, events, counts = dispatcher(the_gate)
    dispatch(RawEmail(forged, origin="letter:1"))
    dispatch(RawEmail(good, origin="letter:2"))
    assert [e.topic for e in delivered] == ["lab/temperature"]
    assert counts == {"bad_signature": 1, "received": 1}
    [(reason, detail)] = skipped(events)
    assert reason == "bad_signature"
    assert detail == "bad signature: a bare CR in the header block (line ends must be CRLF or LF)"
    the_gate.close()


@pytest.mark.parametrize(
    "variant",
    ["fresh-message-id", "multipart-body", "old-email-fresh-timestamp"],
)
def test_every_use_of_the_smuggled_block_is_refused(
    tmp_path: Path, ed_key: Any, variant: str
) -> None:
    key, record = ed_key
    now = time.time_ns()
    email = mailbus_email()
    extra = b""
    if variant == "old-email-fresh-timestamp":
        # Signed a year ago: the smuggled Source-Timestamp would make it fresh again.
        email.headers = {**email.headers, H.SOURCE_TIMESTAMP: str(now - 365 * 86400 * 10**9)}
    if variant == "multipart-body":
        # A signed plain body that happens to look like MIME parts: a smuggled multipart
        # Content-Type would make the parser take the part the attacker chose.
        email.body = '--b\nContent-Type: text/plain\n\n{"cmd": "shutdown"}\n--b--'
        extra = b'Content-Type: multipart/mixed; boundary="b"\r'
    _, data = signed(key, email)
    the_gate = gate(tmp_path, record)
    dispatch, delivered, events, counts = dispatcher(the_gate)
    for i in range(3):  # a fresh Message-ID each time would replay it without limit
        dispatch(RawEmail(smuggled_prefix(now + i, extra) + data, origin=f"letter:{i}"))
    assert delivered == []
    assert counts == {"bad_signature": 3}
    assert {detail for _, detail in skipped(events)} == {
        "bad signature: a bare CR in the header block (line ends must be CRLF or LF)"
    }
    the_gate.close()


def test_lf_only_line_ends_stay_accepted(tmp_path: Path, ed_key: Any) -> None:
    """Mail software that stores LF line ends (Maildir, mbox) changes no signed byte that
    counts: such an email still verifies and is taken."""
    key, record = ed_key
    _, good = signed(key)
    the_gate = gate(tmp_path, record)
    dispatch, delivered, _, counts = dispatcher(the_gate)
    dispatch(RawEmail(good.replace(b"\r\n", b"\n"), origin="maildir:1"))
    assert len(delivered) == 1 and counts == {"received": 1}
    the_gate.close()


def test_a_header_list_the_two_parsers_read_differently_is_refused(ed_key: Any) -> None:
    """dkimpy skips a line starting with "From " anywhere in the header block (mbox); the
    stdlib parser ends the header block there. Whatever the cause, the verdict is a
    failure when the verified header list is not the one Mailbus would act on."""
    key, record = ed_key
    _, good = signed(key)
    head, _, body = good.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    disagreeing = b"\r\n".join([*lines[:3], b"From nobody", *lines[3:]]) + b"\r\n\r\n" + body
    verdict = Verifier({NAME: record}).verify(disagreeing)
    assert verdict.status == (
        "failed: the header block reads differently to the verifier and to the parser"
    )
    assert Verifier({NAME: record}).verify(good).verified


# -- algorithms -----------------------------------------------------------------------------


def test_rsa_sha1_signatures_are_refused(rsa_key: Any) -> None:
    """RFC 8301: verifiers must not consider rsa-sha1 signatures valid."""
    key, record = rsa_key
    plain, _ = signed(key)
    pem = key.material
    data = (
        dkim.sign(
            plain,
            SELECTOR.encode(),
            DOMAIN.encode(),
            pem,
            signature_algorithm=b"rsa-sha1",
            include_headers=[b"from", b"subject", b"date", b"message-id", b"to"]
            + [h.lower().encode() for h in (H.SOURCE_TIMESTAMP, H.PUBLISHER_GID, "Unit")]
            + [b"content-transfer-encoding"],
        )
        + plain
    )
    assert dkim.verify(data, dnsfunc=lambda name, timeout=5: record.encode())  # dkimpy takes it
    verdict = Verifier({NAME: record}).verify(data)
    assert verdict.status == "failed: a=rsa-sha1 is not accepted (RFC 8301): sign with rsa-sha256"


# -- cost -----------------------------------------------------------------------------------


def test_trailing_blank_lines_are_not_paid_for_once_per_signature(ed_key: Any) -> None:
    """A 10 MB tail of CRLFs changes no body hash (DKIM ignores trailing empty lines), so a
    captured email padded with one and carrying four copies of its signature verified
    with four Python loops over five million lines and lists of them. The tail is cut to
    one line end before dkimpy sees the email."""
    key, record = ed_key
    _, good = signed(key)
    signature, _, rest = good.partition(b"\r\n")
    broken = signature.replace(b"; b=", b"; b=AAAA")  # fails after its body hash is checked
    padded = b"\r\n".join([broken, broken, broken, signature, rest]) + b"\r\n" * 5_000_000
    verifier = Verifier({NAME: record})
    tracemalloc.start()
    try:
        verdict = verifier.verify(padded)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert verdict.verified
    # The padded email itself is 10 MB; what verifying it allocates stays near one copy
    # (before: 490 MB of per-line lists).
    assert peak < 40 * 2**20, f"verifying allocated {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"abc\r\n", b"abc\r\n"),
        (b"abc\r\n\r\n\r\n", b"abc\r\n"),
        (b"abc\n\n\n", b"abc\r\n"),
        (b"abc", b"abc"),
        (b"\r\n\r\n", b"\r\n"),
        (b"abc\r\r\n\r\n", b"abc\r\r\n"),  # the CR before the line end is content
        (b"abc\r\n\r", b"abc\r\n\r"),  # a bare CR ends it: left as it came
        (b"", b""),
    ],
)
def test_trailing_blank_lines_cut_keeps_the_body_hash(body: bytes, expected: bytes) -> None:
    assert without_trailing_blank_lines(body) == expected
    head = b"From: a@b\r\n\r\n"
    for name in (b"simple", b"relaxed"):
        policy = dkim.CanonicalizationPolicy.from_c_value(b"relaxed/" + name)
        _, original = dkim.rfc822_parse(head + body)
        _, cut = dkim.rfc822_parse(head + expected)
        assert policy.canonicalize_body(original) == policy.canonicalize_body(cut)


# -- the replay window ----------------------------------------------------------------------


def test_a_full_replay_window_refuses_and_says_so_instead_of_forgetting() -> None:
    guard = ReplayGuard(max_age_s=600, capacity=3)
    now = time.time_ns()
    for i in range(3):
        assert guard.check(f"<{i}@x>", now, now) is None
    reason = guard.check("<3@x>", now, now)
    assert reason == (
        "replay window full: 3 Message-IDs taken within max-age-s (600 s); "
        "raise seen-capacity or lower max-age-s"
    )
    # Nothing inside the window was forgotten: the first is still refused as taken.
    assert "was taken already" in (guard.check("<0@x>", now, now) or "")
    # Once the window moves on, room is made by expiry, never by forgetting.
    later = now + 601 * 10**9
    assert guard.check("<4@x>", later, later) is None


def test_a_full_replay_window_is_counted_apart_at_the_gate(tmp_path: Path, ed_key: Any) -> None:
    key, record = ed_key
    the_gate = gate(tmp_path, record, **{"seen-capacity": 2})
    dispatch, delivered, events, counts = dispatcher(the_gate)
    for i in range(3):
        dispatch(RawEmail(signed(key)[1], origin=f"uid:{i}"))
    assert len(delivered) == 2
    assert counts == {"received": 2, "replay_window_full": 1}
    [(reason, detail)] = skipped(events)
    assert reason == "replay_window_full" and detail.startswith("replay window full: 2 ")
    the_gate.close()
