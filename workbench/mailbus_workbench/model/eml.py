"""A message as an `.eml` file: the exact bytes it arrived with (a rebuild, said so, when
none were kept), under a file name made safe from the topic."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mailbus.email_message import to_bytes
from mailbus.errors import MailbusError
from mailbus.trace import TraceEvent

from mailbus_workbench.model.inspect import sent_date, to_email
from mailbus_workbench.model.recorded_raw import RECORDED_AS
from mailbus_workbench.model.topics import MessageRecord

# Anything but letters, digits, dot, dash and underscore becomes "_": a topic such as
# `../etc/x` or one with control characters must not choose where the file goes.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_STEM = 80
MAX_TRIES = 1000


class ExportError(Exception):
    """The message cannot be exported (no source can be built, no free file name)."""


@dataclass(frozen=True, slots=True)
class Eml:
    data: bytes
    exact: bool  # the bytes that arrived; False: rebuilt from the message
    recorded: bool = False  # a replayed message: the bytes its original was recorded with

    @property
    def description(self) -> str:
        if self.recorded:
            return "the bytes its original was recorded with"
        if self.exact:
            return "the bytes that arrived"
        return "rebuilt from the message (no bytes were kept); Date is its send time"


def eml_of(event: TraceEvent, date: str | None = None) -> Eml:
    """The `.eml` content of a received message: its raw bytes when the event carries
    them, else the RFC 5322 source rebuilt from the message (`date` for its Date, by
    default the send time)."""
    if event.raw is not None:
        return Eml(event.raw, exact=True, recorded=bool(event.extra.get(RECORDED_AS)))
    try:
        return Eml(to_bytes(to_email(event), date=date or sent_date(event)), exact=False)
    except MailbusError as exc:
        raise ExportError(f"cannot build the RFC 5322 source: {exc}") from None


def eml_name(topic: str, number: int) -> str:
    """`<topic>-<number>.eml` with the topic reduced to a safe file name."""
    stem = _UNSAFE.sub("_", topic).strip("._-")[:MAX_STEM] or "message"
    return f"{stem}-{number}.eml"


def write_eml(directory: Path, record: MessageRecord, date: str | None = None) -> tuple[Path, Eml]:
    """Write `record` as an `.eml` file in `directory` under a new name (an existing file
    is never replaced: `-2`, `-3`... are tried); return the path and what was written."""
    eml = eml_of(record.event, date)
    first = directory / eml_name(record.event.name, record.number)
    for attempt in range(1, MAX_TRIES + 1):
        path = first if attempt == 1 else first.with_name(f"{first.stem}-{attempt}.eml")
        try:
            with open(path, "xb") as handle:
                handle.write(eml.data)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
        return path, eml
    raise ExportError(f"{MAX_TRIES} files named like {first.name} exist in {directory}")
