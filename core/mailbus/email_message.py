"""The email container: recipients, sender, subject, body and headers, as RFC 5322 bytes.

Building writes the header block directly from validated fields with the stdlib's
`email.utils` and `email.header` helpers: the stdlib's `Message.as_bytes()` builds only
about 4,000 messages/s here, and `EmailMessage` with `policy.default` under 1,000/s,
while an observer catching up on a backlog needs more than 10,000/s. Parsing runs the
stdlib's compat32 header parser on the header block only and decodes the body itself
(10,000-13,000/s for a 500-byte email with 10 headers on a quiet machine, against under
5,000/s with `policy.default`; docs/benchmarks.md); tests check that `policy.default`
reads our bytes the same way.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import quopri
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from email import message_from_bytes
from email.header import Header, decode_header, make_header
from email.parser import BytesHeaderParser
from email.utils import formatdate, getaddresses

from mailbus import headers as H
from mailbus.errors import EmailFormatError, InvalidNameError
from mailbus.names import check_address, check_header_name, check_header_value
from mailbus.random_pool import RandomPool

DEFAULT_SENDER = "mailbus@localhost"
# Bounds on what a parse may cost: a hostile email must not stall a receiver.
MAX_HEADER_BLOCK = 64 * 1024
MAX_HEADER_VALUE = 8 * 1024
# Codecs a body may name. Others (punycode, idna, ...) are refused: some decode in
# super-linear time, and none is used for mail text.
_BODY_CHARSETS = frozenset(
    ["utf-8", "utf8", "us-ascii", "ascii", "latin-1", "latin1", "utf-16", "utf-32"]
    + [f"iso-8859-{n}" for n in range(1, 17)]
    + [f"windows-{n}" for n in range(1250, 1259)]
    + [f"cp{n}" for n in range(1250, 1259)]
    + ["koi8-r", "koi8-u", "gb2312", "gbk", "gb18030", "big5", "shift_jis", "euc-jp"]
    + ["iso-2022-jp", "euc-kr"]
)
MAX_PLAIN_HEADER_LENGTH = 900
_MAX_BODY_LINE = 998
_DECODED_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\u2028\u2029]")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_SEVEN_BIT_SAFE = re.compile(r"[\t\n\x20-\x7e]*")


@dataclass(slots=True)
class Email:
    """One email as Mailbus sees it. Bcc recipients never appear in the built bytes.

    Treat it as read-only: it is shared by every subscription that receives it. (Not a
    frozen dataclass because freezing doubles its construction cost on the hot path.)"""

    subject: str
    body: str
    sender: str = DEFAULT_SENDER
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    bcc: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    message_id: str = ""
    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    # The bytes this email was parsed from, when it came over the wire.
    raw: bytes | None = field(default=None, compare=False, repr=False)
    # With `raw`: every (name, raw value) field the parser read, in order, duplicates
    # included; what a signature must have covered (the verifier compares the two).
    fields: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    @property
    def recipients(self) -> tuple[str, ...]:
        return self.to + self.cc + self.bcc

    def with_message_id(self, message_id: str) -> Email:
        return Email(
            subject=self.subject,
            body=self.body,
            sender=self.sender,
            to=self.to,
            cc=self.cc,
            bcc=self.bcc,
            headers=self.headers,
            message_id=message_id,
            in_reply_to=self.in_reply_to,
            references=self.references,
            raw=self.raw,
            fields=self.fields,
        )


_random = RandomPool(12)  # 96 bits per Message-ID


def new_message_id(sender: str = DEFAULT_SENDER) -> str:
    """96 random bits: unique across processes and machines, and unpredictable, so that
    nobody can pre-send an email with the next ID and have the real one dropped as a
    duplicate."""
    domain = sender.rpartition("@")[2] or "localhost"
    return f"<{_random.take().hex()}@{domain}>"


def _check_wire_length(name: str, value: str) -> None:
    """The one header-length rule, on every transport (in-process too): what a receiver
    would drop is refused at publish(). Plain ASCII travels unfolded, so it must fit a
    line; anything else is measured as RFC 2047 encoded words, as the receiver measures."""
    if value.isascii() and "=?" not in value:
        if len(value) > MAX_PLAIN_HEADER_LENGTH:
            raise InvalidNameError(f"header {name!r} is longer than {MAX_PLAIN_HEADER_LENGTH}")
        return
    encoded = len(_FOLD.sub("", _header_value(name, value)))
    if encoded > MAX_HEADER_VALUE:
        raise InvalidNameError(
            f"header {name!r} is {encoded} characters once encoded for the wire; receivers "
            f"drop values over {MAX_HEADER_VALUE}"
        )


# What validate() has found good already, by kind: a topic, a sender, a recipient and a
# header name recur on nearly every email, so each is checked once. Bounded: cleared
# when full.
_GOOD_SUBJECTS: set[str] = set()
_GOOD_ADDRESSES: set[str] = set()
_GOOD_NAMES: set[str] = set()
_KNOWN_GOOD_MAX = 4096
# A value that passes every rule at a glance: printable ASCII with no white space at
# either end and no encoded word, short enough to travel unfolded.
_INNER = MAX_PLAIN_HEADER_LENGTH - 2
_PLAIN_VALUE = re.compile(rf"[!-~](?:[ \t!-~]{{0,{_INNER}}}[!-~])?")
# A plain identifier: `<`, these characters (a regex class), `>`, at most PLAIN_ID_MAX
# long, and no "=?" (the player runs this rule on whole columns in polars).
PLAIN_ID_CHARACTERS = "!-;=?-~"
PLAIN_ID_MAX = _INNER + 2
_PLAIN_ID = re.compile(rf"<[{PLAIN_ID_CHARACTERS}]{{1,{_INNER}}}>")


def validate(email: Email) -> None:
    """Raise InvalidNameError for anything that would corrupt or inject headers.

    Runs on every email sent (EmailSender.send), so what it has seen pass is taken at a
    glance; anything else gets the full check, which says what is wrong."""
    if not _at_a_glance(email):
        _validate_in_full(email)
        for known, values in (
            (_GOOD_SUBJECTS, (email.subject,)),
            (_GOOD_ADDRESSES, (email.sender, *email.recipients)),
            (_GOOD_NAMES, email.headers),
        ):
            if len(known) > _KNOWN_GOOD_MAX:
                known.clear()
            known.update(values)


def _at_a_glance(email: Email) -> bool:
    """True only for an email the full check would pass."""
    if email.subject not in _GOOD_SUBJECTS or email.sender not in _GOOD_ADDRESSES:
        return False
    for address in email.recipients:
        if address not in _GOOD_ADDRESSES:
            return False
    plain = _PLAIN_VALUE.fullmatch
    for name, value in email.headers.items():
        if name not in _GOOD_NAMES:
            return False
        # Numbers and GIDs, the metadata on every email, pass without the pattern.
        short_word = value.isalnum() and value.isascii() and len(value) <= _INNER
        if not short_word and (not plain(value) or "=?" in value):
            return False
    plain_id = _PLAIN_ID.fullmatch
    if email.message_id and not plain_id(email.message_id):
        return False
    if email.in_reply_to and not plain_id(email.in_reply_to):
        return False
    return all(plain_id(reference) for reference in email.references)


def plain_id(value: str) -> bool:
    """True for a message identifier `<...>` that the full check passes as it is, as a
    Message-ID, In-Reply-To or References and as any header's value: what a caller
    that vouches for the rest of an email checks of each identifier it did not make."""
    return _PLAIN_ID.fullmatch(value) is not None and "=?" not in value


def _validate_in_full(email: Email) -> None:
    check_header_value("Subject", email.subject)
    _check_wire_length("Subject", email.subject)
    check_address(email.sender)
    for address in email.recipients:
        check_address(address)
    for name, value in email.headers.items():
        check_header_name(name)
        if name.lower() in H.RESERVED:
            raise InvalidNameError(f"header {name!r} is set by Mailbus and cannot be overridden")
        check_header_value(name, value)
        _check_wire_length(name, value)
    for name, value in (
        ("Message-ID", email.message_id),
        ("In-Reply-To", email.in_reply_to),
        *(("References", r) for r in email.references),
    ):
        check_header_value(name, value)
        if value and (" " in value or not (value.startswith("<") and value.endswith(">"))):
            raise InvalidNameError(f"{name} {value!r} is not a message identifier <...>")


def _header_value(name: str, value: str) -> str:
    if value.isascii() and "=?" not in value:
        if len(value) > MAX_PLAIN_HEADER_LENGTH:
            raise InvalidNameError(f"header {name!r} is longer than {MAX_PLAIN_HEADER_LENGTH}")
        return value
    # RFC 2047 encoded words, folded by the stdlib.
    return Header(value, "utf-8", header_name=name).encode(linesep="\r\n")


def _body_is_seven_bit(body: str) -> bool:
    if not body or body.endswith("\n") or not _SEVEN_BIT_SAFE.fullmatch(body):
        return False
    return all(len(line) <= _MAX_BODY_LINE for line in body.split("\n"))


def to_bytes(email: Email, *, date: str | None = None) -> bytes:
    """RFC 5322 bytes of `email` (CRLF line ends), validated first (InvalidNameError).
    Sets a Message-ID when it has none."""
    validate(email)
    return encode(email, date=date)


def encode(email: Email, *, date: str | None = None) -> bytes:
    """RFC 5322 bytes of an `email` already validated (by `EmailSender.send`).

    A body that is plain ASCII with short lines travels as 7bit so that it stays readable
    in any mail client; anything else travels as base64, which keeps every byte exact.
    """
    message_id = email.message_id or new_message_id(email.sender)
    lines = [
        f"Message-ID: {message_id}",
        f"Date: {date or formatdate(usegmt=True)}",
        f"From: {email.sender}",
    ]
    if email.to:
        lines.append("To: " + ", ".join(email.to))
    if email.cc:
        lines.append("Cc: " + ", ".join(email.cc))
    lines.append("Subject: " + _header_value("Subject", email.subject))
    if email.in_reply_to:
        lines.append(f"In-Reply-To: {email.in_reply_to}")
    if email.references:
        lines.append("References: " + " ".join(email.references))
    for name, value in email.headers.items():
        lines.append(f"{name}: {_header_value(name, value)}")
    lines.append("MIME-Version: 1.0")
    lines.append('Content-Type: text/plain; charset="utf-8"')
    if _body_is_seven_bit(email.body):
        lines.append("Content-Transfer-Encoding: 7bit")
        body = email.body.replace("\n", "\r\n") + "\r\n"
    else:
        lines.append("Content-Transfer-Encoding: base64")
        body = base64.encodebytes(email.body.encode("utf-8")).decode("ascii").replace("\n", "\r\n")
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode("ascii")


def _text(value: object) -> str:
    if type(value) is str and "\n" not in value and "=?" not in value and value.isascii():
        if len(value) > MAX_HEADER_VALUE:
            raise EmailFormatError(f"a header value is longer than {MAX_HEADER_VALUE} characters")
        return value.strip()
    if isinstance(value, Header):
        value = str(make_header(decode_header(value)))
    text = str(value)
    # 8-bit bytes in a header arrive as surrogate escapes under compat32.
    if any("\udc80" <= c <= "\udcff" for c in text):
        text = text.encode("ascii", "surrogateescape").decode("utf-8", "replace")
    text = _FOLD.sub("", text)
    if len(text) > MAX_HEADER_VALUE:
        raise EmailFormatError(f"a header value is longer than {MAX_HEADER_VALUE} characters")
    if "=?" in text:
        # Text that only looks like encoded words is kept as written.
        with contextlib.suppress(binascii.Error, LookupError, UnicodeError, ValueError):
            text = str(make_header(decode_header(text)))
        if _DECODED_CONTROL.search(text):
            raise EmailFormatError("an encoded header decodes to control characters")
    return text.strip()


def _message_ids(value: str) -> tuple[str, ...]:
    return tuple(re.findall(r"<[^<>\s]+>", value))


_PLAIN_ADDRESS = re.compile(r"[^\s<>,;:\"()]+@[^\s<>,;:\"()]+")


def _addresses(values: list[str]) -> tuple[str, ...]:
    if len(values) == 1 and _PLAIN_ADDRESS.fullmatch(values[0]):
        return (values[0],)
    return tuple(addr for _, addr in getaddresses(values) if addr)


_BODY_START = re.compile(rb"\r?\n\r?\n")
_HEADER_PARSER = BytesHeaderParser()
_CHARSET = re.compile(r"""charset\s*=\s*"?([^";\s]+)""", re.IGNORECASE)


_B64_WHITESPACE = re.compile(rb"[ \t\r\n]+")
# '=' must start a hex pair or a soft line break; quopri would keep anything else as is.
_QP_BAD_ESCAPE = re.compile(rb"=(?![0-9A-Fa-f]{2}|[ \t]*\r?\n|[ \t]*\Z)")


def _decode_body(data: bytes, encoding: str, charset: str) -> str:
    # Strict on purpose: a lenient decoder turns a damaged body into another message
    # ('aGVs**bG8=' into 'hello', '!!!' into ''), delivered as if nothing happened.
    if encoding == "base64":
        try:
            data = base64.b64decode(_B64_WHITESPACE.sub(b"", data), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EmailFormatError(f"body is not valid base64: {exc}") from None
    else:
        if encoding == "quoted-printable":
            bad = _QP_BAD_ESCAPE.search(data)
            if bad is not None:
                found = data[bad.start() : bad.start() + 3]
                raise EmailFormatError(f"body is not valid quoted-printable: {found!r}")
            data = quopri.decodestring(data)
        data = data.replace(b"\r\n", b"\n")
        # The builder ends a 7bit body with one line break; servers may add one too.
        if data.endswith(b"\n"):
            data = data[:-1]
    try:
        return data.decode(charset)
    except LookupError:
        raise EmailFormatError(f"unknown charset {charset!r}") from None
    except UnicodeDecodeError as exc:
        raise EmailFormatError(f"body is not valid {charset}: {exc.reason}") from None


def _body(raw: bytes, body_start: int, content_type: str, encoding: str) -> str:
    """Decode the body of `raw`, taking the first text/plain part of a multipart email."""
    if content_type.lower().lstrip().startswith("multipart/"):
        found = next(
            (
                p
                for p in message_from_bytes(raw).walk()
                if p.get_content_type() == "text/plain" and not p.is_multipart()
            ),
            None,
        )
        if found is None:
            raise EmailFormatError("multipart email without a text/plain part")
        payload = found.get_payload()
        if not isinstance(payload, str):
            raise EmailFormatError("email has no body")
        # compat32 holds the payload as ASCII with surrogate escapes for 8-bit bytes.
        data = payload.encode("ascii", "surrogateescape")
        content_type = str(found.get("Content-Type", "text/plain"))
        encoding = str(found.get("Content-Transfer-Encoding", "7bit"))
    else:
        if not content_type.lower().lstrip().startswith("text/"):
            raise EmailFormatError(f"body of type {content_type.split(';')[0]!r} is not text")
        data = raw[body_start:]
    match = _CHARSET.search(content_type)
    charset = match.group(1).lower() if match else "us-ascii"
    if charset not in _BODY_CHARSETS:
        raise EmailFormatError(f"charset {charset!r} is not accepted for a body")
    return _decode_body(data, encoding.strip().lower(), charset)


def from_bytes(raw: bytes) -> Email:
    """Parse RFC 5322 bytes. Raise EmailFormatError if they are not an email with a body."""
    try:
        return _from_bytes(raw)
    except (RecursionError, ValueError, LookupError, TypeError) as exc:
        if isinstance(exc, EmailFormatError):
            raise
        # The stdlib's address parser recurses on nested comments, for one.
        raise EmailFormatError(f"email could not be parsed: {type(exc).__name__}") from None


def split_header_block(raw: bytes) -> tuple[int, int] | None:
    """Where the header block of `raw` ends and its body starts, as `from_bytes` splits
    them; None when there is no blank line within MAX_HEADER_BLOCK bytes."""
    separator = _BODY_START.search(raw, 0, MAX_HEADER_BLOCK + 4)
    return None if separator is None else separator.span()


def header_fields(block: bytes) -> list[tuple[str, str]]:
    """The (name, raw value) fields `from_bytes` reads from a header block, in order."""
    return list(_HEADER_PARSER.parsebytes(block + b"\r\n\r\n").raw_items())


def _from_bytes(raw: bytes) -> Email:
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise EmailFormatError(f"expected bytes, got {type(raw).__name__}")
    raw = bytes(raw)
    split = split_header_block(raw)
    if split is None:
        if len(raw) > MAX_HEADER_BLOCK:
            raise EmailFormatError(f"header block longer than {MAX_HEADER_BLOCK} bytes")
        raise EmailFormatError("no blank line between header block and body")
    head_end, body_start = split
    # Only the header block goes through the stdlib parser; the body is decoded here.
    msg = _HEADER_PARSER.parsebytes(raw[:head_end] + b"\r\n\r\n")
    reserved: dict[str, list[str]] = {}
    extra: dict[str, str] = {}
    fields = tuple(msg.raw_items())
    for name, value in fields:
        lowered = name.lower()
        if lowered in H.RESERVED:
            reserved.setdefault(lowered, []).append(_text(value))
        else:
            # Mail software may change the case of field names; ours are canonical.
            extra[H.CANONICAL.get(lowered, name)] = _text(value)
    if "subject" not in reserved:
        raise EmailFormatError("email has no Subject" if msg.keys() else "no header block")

    def first_id(name: str) -> str:
        values = reserved.get(name)
        return next(iter(_message_ids(values[0])), "") if values else ""

    from_values = _addresses(reserved.get("from", []))
    return Email(
        subject=reserved["subject"][0],
        body=_body(
            raw,
            body_start,
            reserved.get("content-type", ["text/plain"])[0],
            reserved.get("content-transfer-encoding", ["7bit"])[0],
        ),
        sender=from_values[0] if from_values else "",
        to=_addresses(reserved["to"]) if "to" in reserved else (),
        cc=_addresses(reserved["cc"]) if "cc" in reserved else (),
        headers=extra,
        message_id=first_id("message-id"),
        in_reply_to=first_id("in-reply-to"),
        references=_message_ids(reserved["references"][0]) if "references" in reserved else (),
        raw=raw,
        fields=fields,
    )
