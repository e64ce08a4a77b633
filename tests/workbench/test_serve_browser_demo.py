"""`mailbus serve` on the demo, in headless Chromium as a person uses it: every page
watches the one demo system the server runs, typing right after a click goes where the
click put it, and the key bar fits a 1400x900 page."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from test_serve_browser import Viewer, chromium, served

pytestmark = pytest.mark.slow


def test_two_pages_on_the_served_demo_watch_one_system(tmp_path: Path) -> None:
    """A message published in one page shows in the other (each page once ran a demo
    system of its own, and the other page never saw it)."""
    env = {
        **os.environ,
        "MAILBUS_WORKBENCH_DIR": str(tmp_path / "config"),
        "MAILBUS_CONFIG_FILE": "",
    }
    with served(env) as url, chromium() as browser:
        first = Viewer(browser, url)
        first.wait_for(r"sensors")
        second = Viewer(browser, url)
        second.wait_for(r"sensors")
        # At 1400x900 the key bar lists every view's key, N and P too, and ends with
        # Help, Quit and the palette (it was cut at "0 Log f1").
        bar = second.wait_for(r"q Quit +\^p Commands *$").splitlines()[-1]
        assert re.search(r" 9 (Sessions  )?0 (Log  )?N (Participants  )?P ", bar), bar
        assert " f1 Help " in bar, bar
        first.click_text("Publish")
        first.wait_for(r"Save template")
        first.page.keyboard.type("greetings/fromfirst")
        first.page.keyboard.press("Tab")  # the completion, if any, then the body
        first.wait_for(r"greetings/fromfirst")
        first.click_text("Send once")
        first.wait_for(r"[Pp]ublished", 20)
        # The other page's Topics lists it: the same system, not a demo of its own.
        second.wait_for(r"greetings", 30)
        first.close()
        second.close()


def test_typing_at_once_after_a_click_on_the_plot_tab_reaches_the_box(tmp_path: Path) -> None:
    """The first letters typed right after the click are not taken by the view the
    click left ("robot/pose.x" once arrived as "bot/pose.x")."""
    env = {
        **os.environ,
        "MAILBUS_WORKBENCH_DIR": str(tmp_path / "config"),
        "MAILBUS_CONFIG_FILE": "",
    }
    with served(env) as url, chromium() as browser:
        viewer = Viewer(browser, url)
        viewer.wait_for(r"sensors")
        for _ in range(5):
            viewer.click_text("Topics")
            viewer.wait_for(r"filter topics")
            viewer.click_text("Plot")
            viewer.page.keyboard.type("robot/pose.x")  # no pause after the click
            screen = viewer.wait_for(r"▊ *\S*pose\.x")
            typed = re.search(r"▊ *(\S*pose\.x)", screen)
            assert typed is not None and typed.group(1) == "robot/pose.x", screen
            assert "PAUSED" not in screen, "a letter reached the Topics view"
            viewer.page.keyboard.press("Control+u")  # empty the box for the next try
            viewer.wait_for(r"add: topic\.field")
        # A topic never seen is added, with a hint that says so.
        viewer.page.keyboard.type("nosuch/topic.x")
        viewer.page.keyboard.press("Enter")
        screen = viewer.wait_for(r"added; no message seen on", 10)
        assert "nosuch/topic yet: it fills when one" in screen, screen
        viewer.close()
