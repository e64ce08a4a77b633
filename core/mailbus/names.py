"""Validation of every name that becomes a header, an address or a path."""

from __future__ import annotations

import re

from mailbus.errors import InvalidNameError

MAX_NAME_LENGTH = 255
# RFC 5322 field names: printable ASCII except colon.
_FIELD_NAME = re.compile(r"[!-9;-~]+")
# Any C0/C1 control character, DEL, or Unicode line/paragraph separator (mail software
# turns those into line breaks); tabs included since a name is one token.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A deliberately plain address form: local@domain, with no display name or comments.
_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")


def check_name(name: str, what: str = "topic") -> str:
    """Return `name` if it may be used as a topic or service name, else raise.

    Names travel in the Subject header, so a CR or LF would let a caller inject headers.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} name must be a str, not {type(name).__name__}")
    if not name or not name.strip():
        raise InvalidNameError(f"{what} name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(f"{what} name is longer than {MAX_NAME_LENGTH} characters")
    bad = _CONTROL.search(name)
    if bad:
        raise InvalidNameError(
            f"{what} name {name!r} contains control character {bad.group()!r} "
            f"at position {bad.start()}"
        )
    if name != name.strip():
        raise InvalidNameError(f"{what} name {name!r} has leading or trailing white space")
    return name


def check_header_name(name: str) -> str:
    if not _FIELD_NAME.fullmatch(name):
        raise InvalidNameError(f"header name {name!r} is not a valid RFC 5322 field name")
    return name


def check_header_value(name: str, value: str) -> str:
    bad = _CONTROL.search(value.replace("\t", " "))
    if bad:
        raise InvalidNameError(
            f"header {name!r} value contains control character {bad.group()!r} "
            "(header injection refused)"
        )
    if value != value.strip(" \t"):
        # Unfolding on the receiving side would not give it back exactly.
        raise InvalidNameError(f"header {name!r} value has leading or trailing white space")
    return value


def check_address(address: str) -> str:
    if not _ADDRESS.fullmatch(address):
        raise InvalidNameError(f"{address!r} is not a plain email address (local@domain)")
    return address
