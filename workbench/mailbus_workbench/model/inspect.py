"""What the inspector shows of one message: pretty body, headers, raw source, diff."""

from __future__ import annotations

import difflib
import json

from mailbus.email_message import Email, to_bytes
from mailbus.errors import MailbusError
from mailbus.trace import TraceEvent


def pretty_body(body: str) -> tuple[bool, str]:
    """(True, indented JSON) when `body` is JSON, else (False, body)."""
    stripped = body.strip()
    if (
        stripped[:1] in ("{", "[", '"')
        or stripped in ("true", "false", "null")
        or _numberish(stripped)
    ):
        try:
            return True, json.dumps(
                json.loads(stripped), indent=2, ensure_ascii=False, sort_keys=False
            )
        except ValueError:
            pass
    return False, body


def _numberish(text: str) -> bool:
    return bool(text) and text.lstrip("-")[:1].isdigit()


def header_rows(event: TraceEvent) -> list[tuple[str, str]]:
    rows = [("Subject", event.name)]
    if event.message_id:
        rows.append(("Message-ID", event.message_id))
    if event.in_reply_to:
        rows.append(("In-Reply-To", event.in_reply_to))
        rows.append(("References", event.in_reply_to))
    rows.extend((str(k), str(v)) for k, v in event.headers.items())
    return rows


def to_email(event: TraceEvent) -> Email:
    """The email a received-event stands for (the trace carries no addresses, so From
    is the default sender and there are no recipients)."""
    return Email(
        subject=event.name,
        body=event.body or "",
        headers={k: v for k, v in event.headers.items()},
        message_id=event.message_id,
        in_reply_to=event.in_reply_to,
        references=(event.in_reply_to,) if event.in_reply_to else (),
    )


def raw_source(event: TraceEvent, date: str | None = None) -> str:
    """The RFC 5322 source as `mailbus.email_message.to_bytes` writes it."""
    try:
        data = to_bytes(to_email(event), date=date)
    except MailbusError as exc:
        return f"(cannot build the RFC 5322 source: {exc})"
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def body_diff(previous: str | None, current: str) -> str:
    """A unified diff of the two bodies (pretty-printed when JSON)."""
    if previous is None:
        return "(no previous message of this topic is held)"
    a = pretty_body(previous)[1].splitlines()
    b = pretty_body(current)[1].splitlines()
    if a == b:
        return "(identical to the previous message)"
    return "\n".join(difflib.unified_diff(a, b, "previous", "this", lineterm="", n=2))
