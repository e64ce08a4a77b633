"""The workbench's entries in the command palette (ctrl+p or :)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import SystemCommand

if TYPE_CHECKING:
    from mailbus_workbench.app import WorkbenchApp


def workbench_commands(app: WorkbenchApp) -> Iterable[SystemCommand]:
    for view_id, title in app.view_titles():
        yield SystemCommand(
            f"Show {title}", f"Switch to the {title} view", lambda v=view_id: app.action_show(v)
        )
    yield SystemCommand(
        "Pause / resume topics",
        "Freeze the message lists (counts go on)",
        lambda: app.run_view_action("topics", "pause"),
    )
    yield SystemCommand(
        "Clear topics",
        "Forget the topics and messages shown",
        lambda: app.run_view_action("topics", "clear"),
    )
    yield SystemCommand(
        "Set history cap",
        "How many messages to keep per topic",
        lambda: app.run_view_action("topics", "history_cap"),
    )
    yield SystemCommand(
        "Clear service traces",
        "Forget the service calls shown",
        lambda: app.run_view_action("services", "clear"),
    )
    yield SystemCommand(
        "Save SVG screenshot", "Write the current screen as an SVG file", app.action_save_svg
    )
    yield SystemCommand("Reload keymap", f"Read {app.settings.keymap_file} again", app.load_keymap)
    yield SystemCommand("Help", "Keys and what the current view shows", app.action_help)
