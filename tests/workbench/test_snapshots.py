"""Snapshots of every screen on fixed data with a frozen clock (no live demo).

Screens that read outside the model (Queues: an outbox; Broker: a broker in this
process; Mailboxes: a PostOffice store; Sessions and Analysis: sample_sessions/demo)
get that data from `scene_app`, made with fixed ids and times and held still.

Update after an intended change with `pytest tests/workbench/test_snapshots.py
--snapshot-update`, look at the SVGs, and regenerate `screenshots/` with
`scripts/screenshots`."""

from __future__ import annotations

from dataclasses import replace

import pytest
from mailbus_workbench.views.sessions import sessions_available
from workbench_fixtures.screenshots import SCENES, SESSION_SCENES, SIZE, scene_app

# topics-raw and topics-filter are in screenshots/ only: the Raw tab and the filter are
# covered by Pilot tests, and each snapshot costs seconds of the test budget.
SNAPSHOTS = sorted(set(SCENES) - {"topics-raw", "topics-filter"})


@pytest.mark.parametrize("scene", SNAPSHOTS)
def test_screen(scene: str, snap_compare) -> None:  # type: ignore[no-untyped-def]
    if scene in SESSION_SCENES and not sessions_available():
        pytest.skip("the sessions part (mailbus.sessions) is not installed")
    with scene_app(scene) as app:
        assert snap_compare(app, run_before=SCENES[scene], terminal_size=SIZE)


# An 80x24 terminal is first-class (narrow layout: short tab titles, the waterfall left
# out); at 120x40 (a tmux pane) nothing wraps or is cut; a large one must not leave the
# panes at their small sizes. Every screen at each.
@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"]
)
@pytest.mark.parametrize("scene", SNAPSHOTS)
def test_screen_at_size(scene: str, size: tuple[int, int], snap_compare) -> None:  # type: ignore[no-untyped-def]
    if scene in SESSION_SCENES and not sessions_available():
        pytest.skip("the sessions part (mailbus.sessions) is not installed")
    with scene_app(scene) as app:
        assert snap_compare(app, run_before=SCENES[scene], terminal_size=size)


# The light theme where colours carry meaning: JSON punctuation, the wait-set timeline.
@pytest.mark.parametrize("scene", ["call", "wait-sets"])
def test_screen_light(scene: str, snap_compare) -> None:  # type: ignore[no-untyped-def]
    with scene_app(scene) as app:
        app.settings = replace(app.settings, theme="textual-light")
        assert snap_compare(app, run_before=SCENES[scene], terminal_size=SIZE)
