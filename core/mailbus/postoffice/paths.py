"""Where a PostOffice keeps its mailboxes when nobody says: one place for the daemon,
its command line and the workbench, so they all look at the same file."""

from __future__ import annotations

import os
from pathlib import Path


def default_store() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mailbus" / "postoffice.db"
