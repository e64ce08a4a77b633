"""The demo that `mailbus serve` runs once for all its pages: a workbench attached to it
sees the demo's traffic, and closing it leaves no directory behind."""

from __future__ import annotations

import pytest
from mailbus.postoffice.transport import PASSWORD_ENV
from mailbus.trace import Kind, TraceEvent
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.served_demo import ServedDemo
from waiting import eventually


def test_a_page_attached_to_the_served_demo_sees_its_topics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)  # the demo sets it; restored after
    seen: set[str] = set()

    def listen(event: TraceEvent) -> None:
        if event.kind == Kind.RECEIVED.value and event.name:
            seen.add(event.name)

    with ServedDemo() as demo:
        directory = demo.pages_config.parent
        page = EngineHost.from_config(demo.pages_config, viewer=True)
        page.add_listener(listen)
        page.start()
        try:
            assert page.description.startswith("postoffice as box demo.workbenchv")
            eventually(lambda: {"robot/pose", "sensors/temperature"} <= seen, 30, "the demo")
        finally:
            page.stop()
    assert not directory.exists()
