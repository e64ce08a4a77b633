"""The Services view's filter, percentiles table and histogram with Pilot: the
filter narrows the calls, the table and the waterfall; a bad word is said
and loses nothing; the histogram follows the highlighted call's service."""

from __future__ import annotations

from dataclasses import replace

import pytest
from mailbus import headers as H
from mailbus_workbench.views.services import ServicesView
from mailbus_workbench.widgets.latency_histogram import LatencyHistogram
from mailbus_workbench.widgets.service_stats import ServiceStats
from mailbus_workbench.widgets.trace_list import TraceList
from mailbus_workbench.widgets.waterfall import Waterfall
from textual.widgets import Input, Static
from wb_helpers import until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, request_event, response_event

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)
OTHER_CLIENT = "0a0a0a0a1b1b1b1b2c2c2c2c3d3d3d3d"


def arm_calls() -> list:  # type: ignore[type-arg]
    """Two answered calls of robot/arm from another client, at the end of the data."""
    events = []
    for seq in (1, 2):
        mid = f"<arm{seq}@x>"
        request = request_event("robot/arm", "[]", T0 + 11 + seq * 0.1, seq, mid)
        request = replace(
            request,
            source_gid=OTHER_CLIENT,
            headers={**request.headers, H.CLIENT_GID: OTHER_CLIENT},
        )
        events.append(request)
        t = T0 + 11 + seq * 0.1 + 0.01 * seq
        events.append(response_event("robot/arm", "{}", t, seq, f"<armr{seq}@x>", mid))
    return events


def rows(app: object) -> list[tuple[str, str]]:
    """(service, client) of every call listed."""
    traces = app.query_one(TraceList)  # type: ignore[attr-defined]
    return [(t.service, t.client_gid) for t in traces._traces.values()]


async def test_the_filter_narrows_the_calls_and_the_histogram_follows_the_call() -> None:
    app = fixed_app()
    app.model.feed_events(arm_calls())
    app.model.pump()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()  # the initial focus (Topics) first
        await pilot.press("2")
        view = app.view("services")
        assert isinstance(view, ServicesView)
        await until(pilot, lambda: app.focused is app.query_one(TraceList), "the Services view")
        stats = app.query_one(ServiceStats)
        await until(pilot, lambda: stats.services == ["demo/add", "robot/arm"], "both services")
        assert {s for s, _ in rows(app)} == {"demo/add", "robot/arm"}

        await pilot.press("slash")
        field = app.query_one("#services-filter", Input)
        assert app.focused is field
        await pilot.press(*"client=0a0a")
        await until(pilot, lambda: len(rows(app)) == 2, "the other client's calls only")
        assert rows(app) == [("robot/arm", OTHER_CLIENT)] * 2
        assert stats.services == ["demo/add", "robot/arm"]  # a client word keeps services
        waterfall = str(app.query_one(Waterfall).render())
        assert "robot/arm#1" in waterfall and "demo/add#" not in waterfall

        field.value = "status=timed-out"
        await until(pilot, lambda: {s for s, _ in rows(app)} == {"demo/add"}, "timed out calls")
        timed_out = len(rows(app))
        field.value = "service=demo/add"
        await until(pilot, lambda: stats.services == ["demo/add"], "one service in the table")
        assert len(rows(app)) > timed_out
        assert {s for s, _ in rows(app)} == {"demo/add"}
        # In the store's order again after a change of filter (not appended at the end).
        listed = list(app.query_one(TraceList)._traces)
        assert listed == [t.key for t in app.model.services.traces("demo/add")]

        # A word the filter cannot use: said in the counts line, the last filter kept.
        field.value = "service=demo/add status=lost"
        counts = app.query_one("#services-counts", Static)
        await until(pilot, lambda: "unknown status 'lost'" in str(counts.render()), "the error")
        assert {s for s, _ in rows(app)} == {"demo/add"}
        assert field.has_class("-invalid")

        field.value = ""
        await until(pilot, lambda: len({s for s, _ in rows(app)}) == 2, "every call again")
        assert not field.has_class("-invalid")
        assert "unknown status" not in str(counts.render())

        await pilot.press("escape")  # leaves the field: the list has the keys again
        assert app.focused is app.query_one(TraceList)

        # The histogram follows the highlighted call's service.
        traces = app.query_one(TraceList)
        histogram = app.query_one(LatencyHistogram)
        await until(pilot, lambda: traces.row_count > 0, "the calls")
        traces.move_cursor(row=traces.row_count - 1)  # the newest: robot/arm
        await until(pilot, lambda: histogram.service == "robot/arm", "robot/arm's histogram")
        assert "robot/arm: last 2 of 2 calls" in str(histogram.render())
        traces.move_cursor(row=0)
        await until(pilot, lambda: histogram.service == "demo/add", "demo/add's histogram")
        stats = app.query_one(ServiceStats)
        assert stats.selected() == "demo/add"
