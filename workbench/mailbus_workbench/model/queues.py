"""The durable outbox as the queue view sees it: list, retry and purge.

Listing reads without the lock (`mailbus.outbox.listing`); retry and purge go through
`mailbus.outbox.admin.run` like `mailbus queue retry/purge`: under the outbox lock when
it is free, else carried out by the running sender that holds it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mailbus.outbox.admin import run
from mailbus.outbox.control import ControlRequest
from mailbus.outbox.listing import QueueItem, list_outbox


def outbox_dir(sections: Mapping[str, Mapping[str, Any]]) -> Path | None:
    """$MAILBUS_OUTBOX_DIR, else `[outbox] dir` of the options file, else None."""
    env = os.environ.get("MAILBUS_OUTBOX_DIR")
    if env:
        return Path(env)
    value = sections.get("outbox", {}).get("dir")
    if isinstance(value, str) and value:
        return Path(value).expanduser()
    return None


def load(directory: Path, now_ns: int | None = None) -> list[QueueItem]:
    """Every entry of the outbox at `directory` (OSError/MailbusError when it is none);
    ages are counted to `now_ns` (default: now)."""
    return list_outbox(directory, now_ns)


def retry(directory: Path, ids: Iterable[str]) -> list[str]:
    """Make queued entries due now and revive dead ones; return the ids done."""
    return run(directory, ControlRequest("retry", tuple(ids)))


def purge(directory: Path, ids: Iterable[str]) -> list[str]:
    """Remove entries unsent; return the ids done."""
    return run(directory, ControlRequest("purge", tuple(ids)))
