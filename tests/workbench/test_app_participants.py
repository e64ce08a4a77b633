"""The Participants view (Pilot): every participant listed with its details, other
processes' wait sets and broker modules in their views, a dead one dropped, a bad
announcement in the Log. (The demo announcing itself: test_app_broker.py.)"""

from __future__ import annotations

import pytest
from mailbus.trace import Kind
from mailbus_workbench.views.participants import ParticipantsView
from mailbus_workbench.widgets.row_table import RowTable
from textual.widgets import DataTable
from wb_helpers import until
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_app
from workbench_fixtures.participants import announcement_event
from workbench_fixtures.participants import sample_announcements as announcements

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (130, 38)


async def test_participants_are_listed_with_details_wait_sets_and_modules() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("N")
        await until(pilot, lambda: app.active_view_id == "participants", "the view")
        table = app.query_one("#participants-table", RowTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == [
            "gateway",
            "planner",
            "robot-arm",
        ]
        assert [str(c) for c in table.get_row_at(2)[1:4]] == ["lab-pc-2", "4242", "postoffice"]
        view = app.query_one(ParticipantsView)
        assert view.detail_text.startswith("gateway  edge-1:77")
        assert "broker broker 1 module archive (Archive) running queue 735/1000" in (
            view.detail_text
        )
        await pilot.press("down", "down")
        await pilot.pause()
        assert "wait set arm/control: waiting" in view.detail_text
        assert "outbox: 4 waiting" in view.detail_text
        # Their wait sets and broker modules show in those views, by process.
        await pilot.press("3")
        table = app.query_one("#waitset-table", DataTable)
        processes = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert processes == [
            "this process",
            "this process",
            "planner (lab-pc-2:4301)",
            "robot-arm (lab-pc-2:4242)",
        ]
        await pilot.press("7")
        await until(pilot, lambda: app.active_view_id == "broker", "the broker view")
        modules = app.query_one("#broker-modules", DataTable)
        rows = [[str(c) for c in modules.get_row_at(i)[:6]] for i in range(modules.row_count)]
        assert rows[-1][:5] == ["gateway (edge-1:77)", "broker 1", "archive", "Archive", "running"]
        assert rows[-1][5] == "735/1000"


async def test_a_dead_participant_leaves_the_view_and_a_bad_one_goes_to_the_log() -> None:
    clock = FrozenClock(T0 + 12)
    app = fixed_app()
    app.model.clock = clock
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("N")
        table = app.query_one("#participants-table", RowTable)
        assert table.row_count == 3
        # Only the gateway goes on announcing; a foreign body arrives too.
        clock.advance(30)
        gateway = announcements(20)[1]
        foreign = announcement_event(gateway, clock.now)
        foreign.body = '{"format": "other/1"}'
        app.model.feed_events([announcement_event(gateway, clock.now), foreign])
        app.refresh_now()
        app.view("participants").refresh_view(clock.now)  # not waiting for its throttle
        await pilot.pause()
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == ["gateway"]
        notices = [n for n in app.model.notices if n.kind == Kind.ANNOUNCEMENT_INVALID]
        assert len(notices) == 1 and "format 'other/1'" in notices[0].detail
        await pilot.press("0")
        log = app.query_one("#log-table", DataTable)
        await until(pilot, lambda: log.row_count > 0, "the log")
        kinds = [str(log.get_row_at(i)[1]) for i in range(log.row_count)]
        assert Kind.ANNOUNCEMENT_INVALID.value in kinds
