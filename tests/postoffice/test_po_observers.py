"""Observers see the whole conversation on PostOffice: a client and a
server in two processes, the workbench's model and a recorder as two more participants;
every call shows as answered, live and in the recording's analysis."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Daemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from observers_support import check, run_scenario


def roles(daemon: Daemon, **extra: Any) -> dict[str, dict[str, Any]]:
    return {
        role: {
            "transport": "postoffice",
            "postoffice": {"port": daemon.port, "box": f"obs.{role}", "password": "pw", **extra},
        }
        for role in ("server", "client", "watch", "record")
    }


@pytest.mark.slow
def test_observers_see_every_response(daemon: Daemon, tmp_path: Path) -> None:
    model, row = run_scenario(roles(daemon), tmp_path / "session")
    check(model, row)


@pytest.mark.slow
def test_without_observe_responses_observers_see_requests_only(
    daemon: Daemon, tmp_path: Path
) -> None:
    """The option's other side, and the bar this fixes: answered 0, orphans 10."""
    options = roles(daemon, **{"observe-responses": False})
    _model, row = run_scenario(options, tmp_path / "session", calls=3, answers_expected=False)
    assert (row["requests"], row["answered"], row["orphans"]) == (3, 0, 3)
