"""What the inspector shows of one message: pretty body, headers, raw source, diff."""

from __future__ import annotations

import contextlib
import difflib
import json
from datetime import UTC, datetime
from email.utils import format_datetime

from mailbus import headers as H
from mailbus.email_message import DEFAULT_SENDER, Email, to_bytes
from mailbus.errors import MailbusError
from mailbus.names import check_address
from mailbus.trace import TraceEvent

from mailbus_workbench.model.recorded_raw import RECORDED_AS

PRETTY_MAX_CHARS = 256 * 1024  # larger bodies are shown as they came (parsing costs)
# JSON leaves C1 controls (U+0080-U+009F) and DEL raw; a terminal may act on them.
_C1_ESCAPES = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def pretty_body(body: str) -> tuple[bool, str]:
    """(True, indented JSON) when `body` is JSON, else (False, body)."""
    stripped = body.strip()
    if len(stripped) <= PRETTY_MAX_CHARS and (
        stripped[:1] in ("{", "[", '"')
        or stripped in ("true", "false", "null")
        or _numberish(stripped)
    ):
        try:
            pretty = json.dumps(json.loads(stripped), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python goes
            pass
        else:
            return True, pretty.translate(_C1_ESCAPES)
    return False, body


def _numberish(text: str) -> bool:
    return bool(text) and text.lstrip("-")[:1].isdigit()


def header_rows(event: TraceEvent) -> list[tuple[str, str]]:
    rows = [("Subject", event.name)]
    if event.message_id:
        rows.append(("Message-ID", event.message_id))
    if event.in_reply_to:
        rows.append(("In-Reply-To", event.in_reply_to))
        rows.append(("References", " ".join(_references(event))))
    signature = event.extra.get("signature") if event.extra else None
    if isinstance(signature, str):
        # Verified, unsigned, or failed and why ([signing] options; docs/mail.md).
        rows.append(("Signature", signature))
    rows.extend((str(k), _header_value(str(k), str(v))) for k, v in event.headers.items())
    return rows


def _header_value(name: str, value: str) -> str:
    """Source-Timestamp as a UTC time, with the raw nanoseconds kept after it."""
    if name.lower() != H.SOURCE_TIMESTAMP.lower() or not value.isdigit():
        return value
    try:
        when = datetime.fromtimestamp(int(value) / 1e9, UTC)
    except (OverflowError, OSError, ValueError):  # out of the calendar's range: raw
        return value
    return f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d} UTC  ({value} ns)"


def to_email(event: TraceEvent) -> Email:
    """The email a received-event stands for: addresses from the event (events recorded
    before they carried them show the default sender and no recipients)."""
    extra = event.extra
    sender = _addresses((extra.get("from"),))
    return Email(
        sender=sender[0] if sender else DEFAULT_SENDER,
        to=_addresses(extra.get("to")),
        cc=_addresses(extra.get("cc")),
        subject=event.name,
        body=event.body or "",
        headers={k: v for k, v in event.headers.items()},
        message_id=event.message_id,
        in_reply_to=event.in_reply_to,
        references=_references(event),
    )


def _addresses(value: object) -> tuple[str, ...]:
    """The valid addresses in `value` (a tuple live, a JSON list from a recording):
    one the builder would refuse must not cost the whole raw view."""
    if not isinstance(value, list | tuple):
        return ()
    valid = []
    for address in value:
        if isinstance(address, str):
            with contextlib.suppress(MailbusError):
                valid.append(check_address(address))
    return tuple(valid)


def _references(event: TraceEvent) -> tuple[str, ...]:
    """The References chain the event carries (older events: just In-Reply-To)."""
    if event.references:
        return tuple(event.references)
    return (event.in_reply_to,) if event.in_reply_to else ()


def sent_date(event: TraceEvent) -> str:
    """The RFC 5322 Date of the message's send time: its source timestamp, else the
    time of the event (an in-process message keeps no Date of its own)."""
    ns = event.source_timestamp_ns or event.time_ns
    return format_datetime(datetime.fromtimestamp(ns / 1e9, UTC), usegmt=True)


def raw_source(event: TraceEvent, date: str | None = None) -> str:
    """The RFC 5322 source: the bytes the email arrived with when the event carries them
    (bytes that are not UTF-8 shown as \\xNN escapes), else as
    `mailbus.email_message.to_bytes` writes it (`raw_note` says which)."""
    if event.raw is not None:
        return event.raw.decode("utf-8", "backslashreplace").replace("\r\n", "\n")
    try:
        data = to_bytes(to_email(event), date=date or sent_date(event))
    except MailbusError as exc:
        return f"(cannot build the RFC 5322 source: {exc})"
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def raw_note(event: TraceEvent) -> str:
    """One line saying whether `raw_source` shows the bytes that arrived or a rebuild."""
    recorded_as = event.extra.get(RECORDED_AS) if event.extra else None
    if event.raw is not None and recorded_as:
        return (
            f"Recorded: the {len(event.raw):,} bytes the original {recorded_as} arrived "
            "with when the session was recorded (this replay is a new email rebuilt from it)"
        )
    if event.raw is not None:
        return f"As received: {len(event.raw):,} bytes, exactly as the transport delivered them"
    size = event.extra.get("raw_size") if event.extra else None
    if isinstance(size, int):
        return (
            f"Rebuilt: the {size:,} bytes that arrived are over the workbench's raw limit; "
            "this is the source rebuilt from the message, dated with its send time"
        )
    return (
        "Rebuilt from the message, dated with its send time: no bytes were kept (the in-process "
        "transport sends none; older recordings and larger emails have none)"
    )


def body_diff(previous: str | None, current: str) -> str:
    """A unified diff of the two bodies (pretty-printed when JSON)."""
    if previous is None:
        return "(no previous message of this topic is held)"
    a = pretty_body(previous)[1].splitlines()
    b = pretty_body(current)[1].splitlines()
    if a == b:
        return "(identical to the previous message)"
    return "\n".join(difflib.unified_diff(a, b, "previous", "this", lineterm="", n=2))
