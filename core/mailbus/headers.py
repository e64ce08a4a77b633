"""Names of the headers that carry Mailbus metadata (no X- prefix, per RFC 6648)."""

from __future__ import annotations

SOURCE_TIMESTAMP = "Source-Timestamp"
PUBLISHER_GID = "Publisher-GID"
CLIENT_GID = "Client-GID"
SERVER_GID = "Server-GID"
REQUEST_SEQUENCE_NUMBER = "Request-Sequence-Number"
# Optional on messages: lets a subscriber or a recording see gaps and reordering.
PUBLISHER_SEQUENCE_NUMBER = "Publisher-Sequence-Number"
IN_REPLY_TO = "In-Reply-To"
REFERENCES = "References"
MESSAGE_ID = "Message-ID"
# Set on replayed emails only (mailbus.sessions.player): the recorded Message-ID and the
# recorded Source-Timestamp, so replayed traffic is told apart and keeps its own time.
REPLAY_OF = "Replay-Of"
REPLAY_SOURCE_TIMESTAMP = "Replay-Source-Timestamp"

# Headers the Email container writes itself; callers cannot set them as extra headers.
RESERVED = frozenset(
    h.lower()
    for h in (
        "Message-ID",
        "Date",
        "From",
        "To",
        "Cc",
        "Bcc",
        "Subject",
        "MIME-Version",
        "Content-Type",
        "Content-Transfer-Encoding",
        IN_REPLY_TO,
        REFERENCES,
    )
)

# Headers that carry Mailbus metadata; a publisher's extra headers may not set them.
METADATA = frozenset(
    h.lower()
    for h in (
        SOURCE_TIMESTAMP,
        PUBLISHER_GID,
        CLIENT_GID,
        SERVER_GID,
        REQUEST_SEQUENCE_NUMBER,
        PUBLISHER_SEQUENCE_NUMBER,
        REPLAY_SOURCE_TIMESTAMP,  # only the player sets it: a publisher cannot forge one
    )
)

# Lower-case name -> our spelling, for headers read back from other mail software.
CANONICAL = {
    h.lower(): h
    for h in (
        SOURCE_TIMESTAMP,
        PUBLISHER_GID,
        CLIENT_GID,
        SERVER_GID,
        REQUEST_SEQUENCE_NUMBER,
        PUBLISHER_SEQUENCE_NUMBER,
        REPLAY_SOURCE_TIMESTAMP,
    )
}

INT64_MAX = 2**63 - 1
_MAX_DIGITS = len(str(INT64_MAX))


def parse_number(name: str, value: str) -> int:
    """A metadata number as Mailbus writes it: 1 to 19 ASCII digits, at most 2**63 - 1.

    Python's int() would also take a sign, '_', surrounding spaces and any script's
    digits ('١٢٣' is 123), and numbers of any size, which then overflow a Parquet column
    or a C long. Raises ValueError naming the header and showing the start of the value.
    """
    if not (0 < len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit()):
        raise ValueError(f"header {name} is not a number of 1-19 ASCII digits: {value[:40]!r}")
    number = int(value)
    if number > INT64_MAX:
        raise ValueError(f"header {name} is beyond the signed 64-bit range: {value[:40]!r}")
    return number
