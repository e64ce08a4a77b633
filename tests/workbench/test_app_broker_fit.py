"""The Broker table fits a 120-column terminal and names only the problems there are."""

from __future__ import annotations

import threading

import pytest
from mailbus.broker import Broker, BrokerMessage
from mailbus.broker.policy import Backpressure, Overflow
from textual.widgets import DataTable
from wb_helpers import until
from workbench_fixtures.events import fixed_app

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow


class Held:
    """A sink that holds the first message until the test ends (so its queue fills)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def receive(self, message: BrokerMessage) -> None:
        self.release.wait(10)

    def destroy(self) -> None:
        self.release.set()


class Source:
    def receive(self, message: BrokerMessage) -> None:
        pass

    def destroy(self) -> None:
        pass


async def test_the_module_table_fits_120_columns_and_says_what_was_dropped() -> None:
    broker = Broker.create()
    source, held = Source(), Held()
    broker.add_module("sensor", source)
    broker.add_module(
        "slow", held, capacity=2, backpressure=Backpressure(overflow=Overflow.DROP_NEWEST)
    )
    broker.add_link("sensor", "slow")
    for i in range(8):
        broker.publish(source, BrokerMessage(f"m{i}"))
    app = fixed_app(brokers={"lab": broker})
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("7")
            await until(pilot, lambda: app.active_view_id == "broker", "the Broker view")
            modules = app.query_one("#broker-modules", DataTable)

            def problems(module: str) -> str:
                for i in range(modules.row_count):
                    row = modules.get_row_at(i)
                    if str(row[0]) == "this process" and str(row[2]) == module:
                        return str(row[-1])
                return ""

            await until(pilot, lambda: "dropped" in problems("slow"), "the drops counted")
            # 8 sent into 2 places and the one in receive(), if the worker took it yet.
            assert problems("slow") in ("5 dropped", "6 dropped"), problems("slow")
            assert problems("sensor") == "none"
            await pilot.pause()
            # Every column is on screen: nothing to scroll to at 120 columns.
            assert modules.virtual_size.width <= modules.scrollable_content_region.width
            labels = [str(column.label) for column in modules.columns.values()]
            assert labels[-1] == "problems"
    finally:
        held.release.set()
        broker.dec_ref()
