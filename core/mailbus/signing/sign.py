"""Signing: a DKIM-Signature (RFC 6376; ed25519-sha256 per RFC 8463, or rsa-sha256)
on top of an email's bytes, made by dkimpy.

Every header of the email is signed (the fixed list below, which also names headers an
email may lack, plus whatever custom headers it has), each once more than it appears
("oversigned": a name listed in h= where no further instance exists hashes as empty), so
that nobody can add a second Subject or Source-Timestamp above the signed one: readers
take the first instance, DKIM the last.
"""

from __future__ import annotations

import logging
import re

import dkim

from mailbus import headers as H
from mailbus.errors import TransportError
from mailbus.signing.keys import PrivateKey

# What a Mailbus email's meaning rests on: addressing, identity, topic, the metadata and
# how the body is encoded.
SIGNED_HEADERS: tuple[str, ...] = (
    "from",
    "to",
    "cc",
    "subject",
    "date",
    "message-id",
    "in-reply-to",
    "references",
    *sorted(H.METADATA),
    "mime-version",
    "content-type",
    "content-transfer-encoding",
)
_FIXED = tuple(name.encode("ascii") for name in SIGNED_HEADERS)
_FIXED_SET = frozenset(_FIXED)
_HEADER_NAME = re.compile(rb"^([!-9;-~]+):", re.MULTILINE)
_BODY_START = re.compile(rb"\r?\n\r?\n")
# relaxed headers survive servers that refold them; simple body keeps every byte.
CANONICALIZE = (b"relaxed", b"simple")

# dkimpy logs what it does; Mailbus reports outcomes itself (trace events).
quiet_logger = logging.getLogger("mailbus.signing.dkimpy")
quiet_logger.addHandler(logging.NullHandler())
quiet_logger.propagate = False


class Signer:
    """Signs email bytes as `selector._domainkey.domain` with one private key."""

    def __init__(self, key: PrivateKey, selector: str, domain: str) -> None:
        self.key = key
        self.selector = selector
        self.domain = domain
        self._selector = selector.encode("ascii")
        self._domain = domain.encode("ascii")
        self._algorithm = key.algorithm.encode("ascii")

    def __repr__(self) -> str:  # never the key
        return f"Signer({self.selector}._domainkey.{self.domain}, {self.key.algorithm})"

    def sign(self, data: bytes) -> bytes:
        """`data` with a DKIM-Signature header in front."""
        end = _BODY_START.search(data)
        block = data[: end.start() if end else len(data)]
        present = {name.lower() for name in _HEADER_NAME.findall(block)}
        # Present headers twice (no second instance may be added), absent ones once (none
        # may be added): each name in h= costs dkimpy a scan of the header block.
        twice = [name for name in _FIXED if name in present] + sorted(present - _FIXED_SET)
        include = (*twice, *(name for name in _FIXED if name not in present), *twice)
        try:
            header = dkim.DKIM(data, logger=quiet_logger).sign(
                self._selector,
                self._domain,
                self.key.material,
                signature_algorithm=self._algorithm,
                canonicalize=CANONICALIZE,
                include_headers=include,
            )
        except dkim.DKIMException as exc:
            # Messages of dkimpy name the problem, never the key's bytes.
            raise TransportError(f"DKIM signing failed: {exc}") from None
        return bytes(header) + data
