"""The relay's UID state file: where it stopped reading, so that a relay killed and
restarted resumes there (mail that came while it was down included).

One small JSON file per account, replaced atomically (written aside, flushed, renamed):
a kill at any moment leaves the old state or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from mailbus.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RelayState:
    uidvalidity: int
    next_uid: int


def load_state(path: Path) -> RelayState | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        raw = json.loads(text)
        state = RelayState(int(raw["uidvalidity"]), int(raw["next_uid"]))
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            "relay state", f"{path} is not a relay state file; delete it to read new mail only"
        ) from None
    if state.uidvalidity < 1 or state.next_uid < 1:
        raise ConfigError("relay state", f"{path} holds impossible UIDs: {state}")
    return state


def save_state(path: Path, state: RelayState) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as out:
        json.dump({"uidvalidity": state.uidvalidity, "next_uid": state.next_uid}, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
