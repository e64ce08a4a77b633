"""The sessions opened last, newest first, kept in a small JSON file beside the
templates (at most MAX_RECENT; a file that cannot be read is treated as empty)."""

from __future__ import annotations

import json
import os
from pathlib import Path

MAX_RECENT = 10


def load(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [p for p in data if isinstance(p, str)][:MAX_RECENT]


def remember(path: Path, session: str) -> list[str]:
    """Put `session` (made absolute) first and save; the list as saved."""
    session = os.path.abspath(session)
    recent = [session, *(p for p in load(path) if p != session)][:MAX_RECENT]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(recent, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return recent
