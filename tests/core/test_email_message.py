import base64
from email import message_from_bytes, policy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.email_message import Email, from_bytes, to_bytes
from mailbus.errors import EmailFormatError, InvalidNameError
from mailbus.names import check_name


def roundtrip(email: Email) -> Email:
    parsed = from_bytes(to_bytes(email))
    assert parsed.message_id.startswith("<")
    return parsed


def test_build_sets_message_id_date_and_from() -> None:
    raw = to_bytes(Email(subject="a/b", body="hi", sender="me@example.com"))
    msg = message_from_bytes(raw, policy=policy.default)
    assert msg["Message-ID"].startswith("<") and msg["Message-ID"].endswith("@example.com>")
    assert msg["Date"] is not None
    assert msg["From"] == "me@example.com"


def test_bcc_never_appears_in_bytes() -> None:
    raw = to_bytes(Email(subject="t", body="b", to=("a@x.org",), bcc=("secret@x.org",)))
    assert b"secret@x.org" not in raw
    assert b"To: a@x.org" in raw


def test_fields_round_trip() -> None:
    email = Email(
        subject="robot/pose",
        body='{"x": 1}',
        sender="a@example.com",
        to=("b@example.com", "c@example.com"),
        cc=("d@example.com",),
        headers={"Source-Timestamp": "17", "Publisher-GID": "ab" * 16},
        message_id="<1@example.com>",
        in_reply_to="<0@example.com>",
        references=("<0@example.com>",),
    )
    parsed = roundtrip(email)
    assert parsed == email


@pytest.mark.parametrize(
    "body",
    ["", "plain", "trailing newline\n", "crlf\r\nline", "naïve ✓ 日本", "x" * 5000, "\n\n", "."],
)
def test_bodies_round_trip_exactly(body: str) -> None:
    assert roundtrip(Email(subject="t", body=body)).body == body


def test_plain_ascii_body_stays_readable_and_others_are_base64() -> None:
    assert b"Content-Transfer-Encoding: 7bit\r\n\r\nhello\r\n" in to_bytes(Email("t", "hello"))
    raw = to_bytes(Email("t", "héllo"))
    assert b"Content-Transfer-Encoding: base64" in raw
    assert base64.b64decode(raw.split(b"\r\n\r\n", 1)[1]) == "héllo".encode()


def test_non_ascii_subject_and_header_use_rfc2047_and_round_trip() -> None:
    email = Email(subject="capteurs/température", body="b", headers={"Note": "größe ✓"})
    raw = to_bytes(email)
    assert raw.isascii() and b"=?utf-8?" in raw
    parsed = from_bytes(raw)
    assert parsed.subject == "capteurs/température"
    assert parsed.headers["Note"] == "größe ✓"


def test_folded_and_encoded_headers_from_other_mailers_parse() -> None:
    raw = (
        b"Message-ID: <f@x>\r\nFrom: Someone <s@x.org>\r\nTo: a@x.org,\r\n b@x.org\r\n"
        b"Subject: =?utf-8?q?caf=C3=A9?=\r\n =?utf-8?q?_au_lait?=\r\n"
        b"Long-Header: part one\r\n\tpart two\r\n\r\nbody\r\n"
    )
    email = from_bytes(raw)
    assert email.subject == "café au lait"
    assert email.sender == "s@x.org"
    assert email.to == ("a@x.org", "b@x.org")
    assert email.headers["Long-Header"] == "part one\tpart two"
    assert email.body == "body"


def test_quoted_printable_and_multipart_bodies_from_other_mailers() -> None:
    qp = (
        b"Subject: t\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\ncaf=C3=A9\r\n"
    )
    assert from_bytes(qp).body == "café"
    multipart = (
        b'Subject: t\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary="B"'
        b"\r\n\r\n--B\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--B\r\n"
        b"Content-Type: text/plain\r\n\r\nthe text\r\n--B--\r\n"
    )
    assert from_bytes(multipart).body == "the text"


def test_our_bytes_read_the_same_with_the_strict_default_policy() -> None:
    email = Email(subject="tópic", body="line1\nline2", headers={"Source-Timestamp": "5"})
    strict = message_from_bytes(to_bytes(email), policy=policy.default)
    assert strict["Subject"] == "tópic"
    assert strict.get_content().replace("\r\n", "\n").rstrip("\n") == "line1\nline2"
    assert not strict.defects


@pytest.mark.parametrize(
    "email",
    [
        Email(subject="evil\r\nBcc: victim@x.org", body="b"),
        Email(subject="t", body="b", headers={"X-A": "v\r\nInjected: 1"}),
        Email(subject="t", body="b", headers={"Bad Name": "v"}),
        Email(subject="t", body="b", headers={"Message-ID": "<spoof@x>"}),
        Email(subject="t", body="b", sender="not an address"),
        Email(subject="t", body="b", to=("a@x.org\r\nCc: b@x.org",)),
        Email(subject="t", body="b", in_reply_to="<a@x>\r\nX: y"),
        Email(subject="t", body="b", headers={"Long": "x" * 1000}),
    ],
)
def test_header_injection_and_bad_fields_are_refused(email: Email) -> None:
    with pytest.raises(InvalidNameError):
        to_bytes(email)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\x01\x02garbage",
        b"no header block at all",
        b"Subject: t\r\n",  # no body separator
        b"From: a@x.org\r\n\r\nno subject",
        b"Subject: t\r\nContent-Type: image/png\r\n\r\n\x89PNG",
        b"Subject: t\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\xff\xfe",
        b"Subject: t\r\nContent-Type: text/plain; charset=klingon\r\n\r\nx",
        b"Subject: t\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\n"
        b"Content-Type: image/png\r\n\r\nx\r\n--B--\r\n",
    ],
)
def test_malformed_bytes_raise_a_clear_error(raw: bytes) -> None:
    with pytest.raises(EmailFormatError):
        from_bytes(raw)


def test_non_bytes_input_is_refused() -> None:
    with pytest.raises(EmailFormatError, match="expected bytes"):
        from_bytes("text")  # type: ignore[arg-type]


header_names = st.from_regex(r"[A-Z][A-Za-z0-9-]{0,20}", fullmatch=True).filter(
    lambda n: (
        n.lower()
        not in {
            "message-id",
            "date",
            "from",
            "to",
            "cc",
            "bcc",
            "subject",
            "mime-version",
            "content-type",
            "content-transfer-encoding",
            "in-reply-to",
            "references",
        }
    )
)
header_values = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\x85\u2028\u2029"),
    max_size=60,
).map(str.strip)
topics = (
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=80)
    .map(str.strip)
    .filter(bool)
)


@settings(max_examples=300, deadline=None)
@given(
    subject=topics,
    body=st.text(st.characters(blacklist_categories=("Cs",)), max_size=300),
    headers=st.dictionaries(header_names, header_values, max_size=5),
)
def test_any_topic_body_and_headers_round_trip(
    subject: str, body: str, headers: dict[str, str]
) -> None:
    # Header names are case-insensitive: keep one spelling of each.
    unique = {
        k: v for k, v in headers.items() if [h.lower() for h in headers].count(k.lower()) == 1
    }
    email = Email(subject=subject, body=body, headers=unique, message_id="<h@x>")
    parsed = from_bytes(to_bytes(email))
    assert parsed.subject == subject
    assert parsed.body == body
    assert dict(parsed.headers) == unique


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_either_parse_or_raise_email_format_error(raw: bytes) -> None:
    try:
        email = from_bytes(raw)
    except EmailFormatError:
        return
    assert isinstance(email.subject, str) and isinstance(email.body, str)


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ("a\u2028b", "control"),
        ("a\u2029b", "control"),
        (" lead", "white space"),
        ("trail ", "white space"),
    ],
)
def test_values_the_wire_cannot_carry_exactly_are_refused(value: str, what: str) -> None:
    with pytest.raises(InvalidNameError, match=what):
        to_bytes(Email(subject="t", body="b", headers={"Note": value}))
    with pytest.raises(InvalidNameError):
        check_name(value)


def test_metadata_header_names_are_read_case_insensitively() -> None:
    raw = b"Subject: t\r\nsource-timestamp: 5\r\nPUBLISHER-GID: g\r\n\r\nb"
    email = from_bytes(raw)
    assert email.headers["Source-Timestamp"] == "5" and email.headers["Publisher-GID"] == "g"


@pytest.mark.parametrize(
    "raw",
    [
        # a codec that decodes in super-linear time
        b"Subject: t\r\nContent-Type: text/plain; charset=punycode\r\n\r\n" + b"a" * 1000,
        # a header block past the bound
        b"Subject: t\r\nX: " + b"y " * 40_000 + b"\r\n\r\nbody",
        # encoded words that decode to a line break (header injection through RFC 2047)
        b"Subject: =?utf-8?q?t=0D=0AX-Evil=3A_1?=\r\n\r\nbody",
        b"Subject: t\r\nPublisher-GID: =?utf-8?q?g=00h?=\r\n\r\nbody",
        # nested comments that make the stdlib's address parser recurse
        b"Subject: t\r\nTo: " + b"(" * 5000 + b"\r\n\r\nbody",
    ],
)
def test_hostile_emails_are_refused_quickly_with_a_clear_error(raw: bytes) -> None:
    with pytest.raises(EmailFormatError):
        from_bytes(raw)


def test_message_ids_are_unpredictable() -> None:
    from mailbus.email_message import new_message_id

    ids = [new_message_id("a@example.com") for _ in range(3)]
    assert len(set(ids)) == 3
    prefixes = {i.split("@")[0][1:9] for i in ids}
    assert len(prefixes) == 3  # no shared counter prefix to guess from
