"""The Participants view with 200 participants (Pilot): every one reachable with the
keys (End, Home, page down), the selected one's details below, the columns past the
screen's edge reached sideways, and the cursor kept on its participant when others come."""

from __future__ import annotations

from dataclasses import replace

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.views.participants import ParticipantsView
from mailbus_workbench.widgets.row_table import RowTable
from wb_helpers import until
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_app
from workbench_fixtures.participants import announcement_event, sample_announcements

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

MANY = 200


def many_participants(app: WorkbenchApp, count: int, t: float) -> None:
    """`count` participants like the gateway, named node000, node001, … (in that order)."""
    gateway = sample_announcements(0)[1]
    app.model.feed_events(
        announcement_event(
            replace(gateway, gid=f"{i + 1:032x}", name=f"node{i:03d}", pid=1000 + i), t
        )
        for i in range(count)
    )
    app.refresh_now()


def drawn(table: RowTable) -> list[str]:
    return [table.render_line(y).text.rstrip() for y in range(table.size.height)]


def names_drawn(table: RowTable) -> list[str]:
    return [line.split()[0] for line in drawn(table)[1:] if line.strip()]


async def test_every_one_of_200_participants_is_reached_with_the_keys() -> None:
    clock = FrozenClock(T0 + 1)
    app = fixed_app()
    app.model.clock = clock
    async with app.run_test(size=(130, 38)) as pilot:
        await pilot.pause()
        many_participants(app, MANY, clock.now)
        await pilot.press("N")
        await until(pilot, lambda: app.active_view_id == "participants", "the view")
        table = app.query_one("#participants-table", RowTable)
        view = app.query_one(ParticipantsView)
        await until(pilot, lambda: table.row_count == MANY + 3, "every participant")
        assert app.focused is table
        assert drawn(table)[0].split()[:4] == ["participant", "host", "pid", "transport"]
        # The fixed three sort among them by name: gateway, node000…node199, planner, robot-arm.
        assert names_drawn(table)[:3] == ["gateway", "node000", "node001"]
        await pilot.press("end")
        await until(pilot, lambda: "robot-arm" in names_drawn(table), "the last row drawn")
        assert names_drawn(table)[-3:] == ["node199", "planner", "robot-arm"]
        assert view.detail_text.startswith("robot-arm  lab-pc-2:4242")
        await pilot.press("home")
        await until(pilot, lambda: names_drawn(table)[0] == "gateway", "the first row drawn")
        # Page by page down to the end: every participant drawn on the way, once listed.
        seen: list[str] = []
        for _ in range(MANY):
            seen += [n for n in names_drawn(table) if n not in seen]
            if "robot-arm" in seen:
                break
            await pilot.press("pagedown")
            await pilot.pause()
        assert seen == ["gateway", *(f"node{i:03d}" for i in range(MANY)), "planner", "robot-arm"]
        await pilot.press("up", "up")
        await until(pilot, lambda: view.detail_text.startswith("node199  edge-1:1199"), "details")


async def test_columns_past_the_edge_are_reached_sideways_and_the_cursor_stays() -> None:
    clock = FrozenClock(T0 + 1)
    app = fixed_app()
    app.model.clock = clock
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        many_participants(app, 20, clock.now)
        await pilot.press("N")
        table = app.query_one("#participants-table", RowTable)
        await until(pilot, lambda: table.row_count == 23, "the participants")
        assert "seen" not in drawn(table)[0]
        # A column a key, as a DataTable's rows: the table is 99 columns wide.
        await pilot.press(*["right"] * 25)
        await until(pilot, lambda: "seen" in drawn(table)[0], "the last column")
        assert drawn(table)[1].endswith("ago")
        await pilot.press("down", "down")  # on node001
        await until(pilot, lambda: table.selected_key() == f"{2:032x}", "the cursor")
        # Others come (named before it): the cursor stays on node001, wherever it moves.
        gateway = sample_announcements(0)[1]
        app.model.feed_events(
            announcement_event(replace(gateway, gid=f"{900 + i:032x}", name=f"a{i}"), clock.now)
            for i in range(5)
        )
        app.refresh_now()
        app.view("participants").refresh_view(clock.now)  # not waiting for its throttle
        await pilot.pause()
        assert table.cursor_row == 7 and table.selected_key() == f"{2:032x}"
        view = app.query_one(ParticipantsView)
        assert view.detail_text.startswith("node001  edge-1:1001")
