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
    )
}
