"""The names of the outbox's layout (see fs_storage for the tree they make)."""

from __future__ import annotations

import re
import uuid

from mailbus.outbox.storage import State

CONTENTS = "contents"
METADATA = "metadata"
SCHEDULE = "schedule"
STATE_DIRS = tuple(State)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
UUID_RE = re.compile(_UUID)
TARGET_RE = re.compile(rf"\.\./data/({_UUID})/({_UUID})")
TMP_RE = re.compile(rf"(?:{CONTENTS}|{METADATA}|{SCHEDULE})\.{_UUID}\.tmp")
JOURNAL = "journal"  # the write-ahead journal (journal.py), beside the state directories


def new_id() -> str:
    return str(uuid.uuid4())
