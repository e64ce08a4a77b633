"""The Services view's percentiles table with calls to 500 services (Pilot): every
service it keeps (the 256 answered last) reached with the keys (End, Home, page down),
the histogram following the row."""

from __future__ import annotations

import pytest
from mailbus_workbench.model.latency import MAX_SERVICES
from mailbus_workbench.widgets.latency_histogram import LatencyHistogram
from mailbus_workbench.widgets.service_stats import ServiceStats
from wb_helpers import until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, request_event, response_event

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

MANY = 500


def calls() -> list:  # type: ignore[type-arg]
    """One answered call to each of svc/call000 … svc/call499."""
    events = []
    for k in range(MANY):
        service, mid, t = f"svc/call{k:03d}", f"<c{k}@x>", T0 + 11 + k * 0.001
        events.append(request_event(service, "{}", t, k, mid))
        events.append(response_event(service, "{}", t + 0.002, k, f"<r{k}@x>", mid))
    return events


def names_drawn(stats: ServiceStats) -> list[str]:
    lines = [stats.render_line(y).text.strip() for y in range(1, stats.size.height)]
    return [line.split()[0] for line in lines if line]


async def test_every_one_of_500_services_is_reached_with_the_keys() -> None:
    app = fixed_app()
    app.model.feed_events(calls())
    app.model.pump()
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause()
        await pilot.press("2")
        stats = app.query_one(ServiceStats)
        kept = {f"svc/call{k:03d}" for k in range(MANY - MAX_SERVICES, MANY)}
        await until(pilot, lambda: kept <= set(stats.services), "every service kept")
        assert stats.row_count == MAX_SERVICES
        assert stats.render_line(0).text.split() == ["service", "calls", "p50", "p90", "p99"]
        await pilot.press("shift+tab")
        await until(pilot, lambda: app.focused is stats, "the table focused")
        first, last = stats.services[0], stats.services[-1]
        # (The call highlighted in the list below may have put the cursor on its service.)
        await pilot.press("home")
        await until(pilot, lambda: names_drawn(stats)[0] == first, "the first service drawn")
        histogram = app.query_one(LatencyHistogram)
        await pilot.press("end")
        await until(pilot, lambda: names_drawn(stats)[-1] == last, "the last service drawn")
        await until(pilot, lambda: histogram.service == last, "its histogram")
        await pilot.press("home")
        await until(pilot, lambda: names_drawn(stats)[0] == first, "the first service drawn")
        seen: list[str] = []
        for _ in range(len(stats.services)):
            seen += [n for n in names_drawn(stats) if n not in seen]
            if last in seen:
                break
            await pilot.press("pagedown")
            await pilot.pause()
        assert seen == stats.services
