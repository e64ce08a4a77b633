"""Verification: check an email's DKIM signatures against the keyring of the options,
with dkimpy. No DNS: dkimpy's key lookup (`dnsfunc`) answers from the keyring only.

The outcome is a status string, the same one traces and recordings keep:
"verified", "unsigned", or "failed: <why>". A signature counts only when its key is in
the keyring, it covers every header Mailbus reads, it signs the whole body (no l=), and
no signed header appears more often than it was signed (an added Subject above the
signed one would otherwise be what the parser reads).

dkimpy and the stdlib parser must read the same header block, or a signature verified
over one list of headers vouches for another: dkimpy ends a line only at CRLF or LF, the
stdlib parser also at a lone CR, so a header block with a bare CR is refused before
anything else, and a header list the two read differently (for any other reason) fails.
Only rsa-sha256 and ed25519-sha256 count (RFC 8301 forbids rsa-sha1). Trailing blank
lines are cut before dkimpy sees the body: DKIM ignores them, and dkimpy pays for each
one in Python, once per signature.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dkim

from mailbus import headers as H
from mailbus.email_message import header_fields, split_header_block
from mailbus.signing.config import key_name
from mailbus.signing.sign import quiet_logger

VERIFIED = "verified"
UNSIGNED = "unsigned"
FAILED = "failed"
# Headers a signature must cover for Mailbus to trust what it reads from the email.
REQUIRED_HEADERS = frozenset({"from", "subject", "date", "message-id"})
# Present in an email, these must be signed too.
MEANINGFUL_HEADERS = frozenset(
    {
        "to",
        "cc",
        "in-reply-to",
        "references",
        "content-type",
        "content-transfer-encoding",
        *H.METADATA,
    }
)
# Bounds on what one hostile email may cost: dkimpy scans the header list once per name
# in h=, for each signature (a Mailbus email has about 20-50 header fields, h= about 50).
_MAX_SIGNATURES = 4
_MAX_HEADER_FIELDS = 1000
_MAX_SIGNED_NAMES = 300
_NAME = re.compile(r"[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*")
_BARE_CR = re.compile(rb"\r(?!\n)")
BARE_CR_REASON = "a bare CR in the header block (line ends must be CRLF or LF)"
_ACCEPTED_ALGORITHMS = frozenset({b"rsa-sha256", b"ed25519-sha256"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome for one email: `status` as recorded, and when verified, the lower-case
    names of the headers the signature covers (the others are not to be trusted)."""

    status: str
    signed_headers: frozenset[str] = frozenset()

    @property
    def verified(self) -> bool:
        return self.status == VERIFIED


class Verifier:
    """Verifies against `keyring`: key_name(selector, domain) -> DKIM key record."""

    def __init__(self, keyring: Mapping[str, str]) -> None:
        self._records = {name: record.encode("ascii") for name, record in keyring.items()}
        # Parsed once: dkimpy would parse the record again for every email (its DNS
        # answer); raises dkim.KeyFormatError for a record that is not a usable key.
        self._keys = {
            name: dkim.evaluate_pk(name.encode("ascii"), record)
            for name, record in self._records.items()
        }

    def _lookup(self, name: bytes, timeout: float = 5) -> bytes | None:
        return self._records.get(name.decode("ascii", "replace").rstrip(".").lower())

    def verify(self, data: bytes, fields: Sequence[tuple[str, str]] | None = None) -> Verdict:
        """The verdict on `data` (an email's bytes as received), whose header fields as
        the parser read them are `fields` (parsed here when not given). Never raises."""
        try:
            return self._verify(data, fields)
        except dkim.DKIMException as exc:
            return Verdict(f"{FAILED}: malformed signature: {_short(exc)}")
        except (ValueError, TypeError, IndexError, KeyError, UnicodeError) as exc:
            return Verdict(f"{FAILED}: malformed signature: {type(exc).__name__}")

    def _verify(self, data: bytes, fields: Sequence[tuple[str, str]] | None) -> Verdict:
        split = split_header_block(data)
        if split is None:
            return Verdict(f"{FAILED}: no header block")
        head_end, body_start = split
        block = data[:head_end]
        if _BARE_CR.search(block):
            return Verdict(f"{FAILED}: {BARE_CR_REASON}")
        data = block + data[head_end:body_start] + without_trailing_blank_lines(data[body_start:])
        checker = dkim.DKIM(data, logger=quiet_logger, minkey=1024)
        count = sum(1 for name, _ in checker.headers if name.lower() == b"dkim-signature")
        if count == 0:
            return Verdict(UNSIGNED)
        if len(checker.headers) > _MAX_HEADER_FIELDS:
            return Verdict(f"{FAILED}: more than {_MAX_HEADER_FIELDS} header fields")
        if not _same_fields(checker.headers, header_fields(block) if fields is None else fields):
            return Verdict(
                f"{FAILED}: the header block reads differently to the verifier and to the parser"
            )
        present = Counter(name.lower().decode("ascii", "replace") for name, _ in checker.headers)
        reasons: list[str] = []
        for index in range(min(count, _MAX_SIGNATURES)):
            reason = self._one(checker, index, present)
            if isinstance(reason, Verdict):
                return reason
            reasons.append(reason)
        # The first reason concerns the topmost signature: the one a sender added last.
        return Verdict(f"{FAILED}: {reasons[0]}")

    def _one(self, checker: dkim.DKIM, index: int, present: Counter[str]) -> str | Verdict:
        try:
            prepared = checker.verify_headerprep(index)
        except dkim.DKIMException as exc:
            return f"malformed signature: {_short(exc)}"
        sig, include, sigheaders = prepared
        if len(include) > _MAX_SIGNED_NAMES:
            return f"malformed signature: h= names more than {_MAX_SIGNED_NAMES} headers"
        algorithm = sig.get(b"a", b"").strip().lower()
        if algorithm not in _ACCEPTED_ALGORITHMS:
            shown = algorithm.decode("ascii", "replace")[:40]
            if algorithm == b"rsa-sha1":
                return f"a={shown} is not accepted (RFC 8301): sign with rsa-sha256"
            return f"a={shown} is not accepted (rsa-sha256 or ed25519-sha256)"
        domain = sig[b"d"].decode("ascii", "replace").strip().lower()
        selector = sig[b"s"].decode("ascii", "replace").strip().lower()
        if not (_NAME.fullmatch(domain) and _NAME.fullmatch(selector)):
            return "malformed signature: bad d= or s="
        name = key_name(selector, domain)
        key = self._keys.get(name)
        if key is None:
            return f"no key for {name} in the keyring"
        if b"l" in sig:
            return "the signature covers only part of the body (l=)"
        signed = Counter(h.decode("ascii", "replace") for h in include)
        missing = sorted(
            h for h in REQUIRED_HEADERS | (MEANINGFUL_HEADERS & present.keys()) if h not in signed
        )
        if missing:
            return f"the signature does not cover {', '.join(missing)}"
        extra = sorted(h for h in signed if present[h] > signed[h])
        if extra:
            return f"header {', '.join(extra)} appears more often than signed"
        try:
            # verify_sig less its key lookup: the key parsed at init (same fields).
            checker.pk, checker.keysize, checker.ktag, checker.seqtlsrpt = key
            ok = checker.verify_sig_process(sig, list(include), sigheaders[index], self._lookup)
        except dkim.ValidationError as exc:
            text = str(exc)
            if text.startswith("body hash mismatch"):
                return "body hash mismatch (the body was changed)"
            return _short(exc)
        except dkim.DKIMException as exc:
            return f"bad key or signature: {_short(exc)}"
        if not ok:
            return f"signature by {name} does not verify (a signed header was changed)"
        return Verdict(VERIFIED, frozenset(signed))


def without_trailing_blank_lines(body: bytes) -> bytes:
    """`body` with its trailing run of empty lines cut to one line end: the same body to
    DKIM (simple and relaxed canonicalisation both drop trailing empty lines), found at C
    speed instead of dkimpy's loop over each line."""
    kept = body.rstrip(b"\r\n")
    tail = body[len(kept) :]
    if not tail or tail.endswith(b"\r"):
        return body  # nothing to cut, or it ends in a bare CR: content, left as it came
    # Line ends are CRLF or LF, so in the tail every CR that is followed by another CR is
    # content of the last line; what follows the last such CR is the run of line ends.
    content = tail.rfind(b"\r\r") + 1
    return kept + tail[:content] + b"\r\n"


def _same_fields(verified: list[tuple[bytes, bytes]], parsed: Sequence[tuple[str, str]]) -> bool:
    """Whether dkimpy's header list and the parser's are the same fields (names, order and
    values, up to folding whitespace)."""
    if len(verified) != len(parsed):
        return False
    for (name, value), (parsed_name, parsed_value) in zip(verified, parsed, strict=True):
        if name.decode("ascii", "surrogateescape").lower() != parsed_name.lower():
            return False
        theirs = parsed_value.encode("ascii", "surrogateescape")
        if value.split() != theirs.split():
            return False
    return True


def _short(exc: BaseException) -> str:
    text = str(exc).replace("\r", " ").replace("\n", " ")
    return text[:200]
