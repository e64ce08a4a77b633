"""The Broker screen over a real broker, and the embedded demo's broker."""

from __future__ import annotations

import threading

import pytest
from mailbus.broker import Broker, BrokerMessage
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.views.broker import BrokerView
from mailbus_workbench.widgets.row_table import RowTable
from textual.widgets import DataTable, Static
from wb_helpers import until
from workbench_fixtures.events import fixed_app

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow


class Gate:
    """A sink that holds every message until the test opens it (so a queue builds)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.got = 0

    def receive(self, message: BrokerMessage) -> None:
        # Bounded, but past any start-up of the app under load: with 10 s, a loaded
        # machine let the first message through before the screen was read (4/50).
        self.open.wait(120)
        self.got += 1

    def destroy(self) -> None:
        self.open.set()


class Source:
    def receive(self, message: BrokerMessage) -> None:
        pass

    def destroy(self) -> None:
        pass


async def test_broker_screen_shows_modules_queue_depth_and_links() -> None:
    broker = Broker.create()
    source, gate = Source(), Gate()
    broker.add_module("sensor", source)
    broker.add_module("slow", gate, capacity=50)
    broker.add_link("sensor", "slow")
    for i in range(6):
        broker.publish(source, BrokerMessage(f"m{i}"))
    app = fixed_app(brokers={"lab": broker})
    try:
        async with app.run_test(size=(150, 36)) as pilot:
            await pilot.pause()
            await pilot.press("7")
            assert app.active_view_id == "broker"
            modules = app.query_one("#broker-modules", DataTable)
            rows = {str(modules.get_row_at(i)[2]): modules.get_row_at(i) for i in range(2)}
            assert str(rows["slow"][5]) in ("5/50", "6/50")  # one may be in receive()
            assert rows["sensor"][7] == "6"
            links = app.query_one("#broker-links", DataTable)
            assert [str(cell) for cell in links.get_row_at(0)[1:3]] == ["sensor", "slow"]
            gate.open.set()
            await until(pilot, lambda: gate.got == 6, "the gate to drain")
            app.view("broker").refresh_view(0)
            rows = {str(modules.get_row_at(i)[2]): modules.get_row_at(i) for i in range(2)}
            assert str(rows["slow"][5]) == "0/50" and rows["slow"][8] == "6"
    finally:
        gate.open.set()
        for name in ("sensor", "slow"):
            broker.remove_module(name, timeout=5)
        broker.dec_ref()


async def test_demo_runs_a_broker_fed_by_topics(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = WorkbenchApp(engine=EngineHost(seed=2))
    async with app.run_test(size=(150, 36)) as pilot:
        await pilot.pause()
        await pilot.press("7")
        view = app.query_one(BrokerView)
        broker = app.brokers["broker 1"]
        await until(
            pilot, lambda: broker.snapshot().module("tally").delivered > 0, "bridged messages"
        )
        view.refresh_view(0)
        summary = str(app.query_one("#broker-summary", Static).render())
        assert "broker 1: 3 modules, 1 links" in summary
        # The demo announces itself (its broker among its modules), listed once as
        # "this" in Participants: its broker and wait sets are not shown twice.
        await until(pilot, lambda: app.model.participants.participants, "its announcement")
        assert summary.count("modules") == 1
        assert app.model.participants.remote_wait_sets() == []
        await pilot.press("N")
        await until(pilot, lambda: app.active_view_id == "participants", "the participants")
        table = app.query_one("#participants-table", RowTable)
        await until(pilot, lambda: table.row_count == 1, "the demo's row")
        assert str(table.get_row_at(0)[0]).endswith("(this)")
        # The first announcement goes at init, before the demo's broker starts; the
        # follow-up (at most announcer.FOLLOW_UP_S later) carries its three modules.
        await until(pilot, lambda: str(table.get_row_at(0)[9]) == "3", "the broker's modules")
    assert broker.snapshot().destroyed
