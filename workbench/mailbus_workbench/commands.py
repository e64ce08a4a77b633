"""The workbench's entries in the command palette (ctrl+p or :)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from textual.app import SystemCommand

from mailbus_workbench.model.settings import Settings


class CommandHost(Protocol):
    """What the palette's commands ask of the app (the app imports this module, so the
    module names no app: no import cycle)."""

    @property
    def settings(self) -> Settings: ...

    def view_titles(self) -> list[tuple[str, str]]: ...
    def action_show(self, view_id: str) -> None: ...
    def run_view_action(self, view_id: str, action: str) -> None: ...
    def action_find(self) -> None: ...
    def action_help(self) -> None: ...
    def action_save_svg(self) -> None: ...
    def load_keymap(self) -> None: ...
    def action_serve_foxglove(self) -> None: ...


def workbench_commands(app: CommandHost) -> Iterable[SystemCommand]:
    for view_id, title in app.view_titles():
        yield SystemCommand(
            f"Show {title}", f"Switch to the {title} view", lambda v=view_id: app.action_show(v)
        )
    yield SystemCommand(
        "Find messages",
        "Search every topic's messages: text, /regex/, Header=value, celsius>25 (ctrl+f)",
        app.action_find,
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
    for action, title, help_text in (
        ("copy_body", "Copy body", "Copy the inspected message's body to the clipboard (c)"),
        ("copy_header", "Copy a header", "Pick a header of the inspected message to copy (C)"),
        ("copy_raw", "Copy raw source", "Copy the inspected message's raw source (R)"),
        ("export_message", "Export message as JSON", "Write the inspected message to a file (j)"),
        ("export_topic", "Export topic", "The topic's kept messages as CSV, JSONL, Parquet (s)"),
    ):
        yield SystemCommand(title, help_text, lambda a=action: app.run_view_action("topics", a))
    yield SystemCommand(
        "Export service calls",
        "The calls of the selected service as CSV, JSON Lines or Parquet (s in Services)",
        lambda: app.run_view_action("services", "export_calls"),
    )
    yield SystemCommand(
        "Clear service traces",
        "Forget the service calls shown",
        lambda: app.run_view_action("services", "clear"),
    )
    for view_id, what in (
        ("topics", "the inspected message (t in Topics)"),
        ("services", "the selected call (t in Services)"),
        ("call", "the selected call of the history (t in Call)"),
        ("sessions", "the open session, as a golden test (F4 in Sessions)"),
    ):
        yield SystemCommand(
            f"Save as test: {view_id}",
            f"Write a pytest file of {what} into the Tests view's folder",
            lambda v=view_id: app.run_view_action(v, "save_test"),
        )
    for action, title, help_text in (
        ("run_all", "Run tests", "Run the tests of the Tests view's folder (r in Tests)"),
        ("rerun_failed", "Rerun failed tests", "Run the failed tests again (f in Tests)"),
        ("stop", "Stop the test run", "End the run and its processes (s in Tests)"),
    ):
        yield SystemCommand(title, help_text, lambda a=action: app.run_view_action("tests", a))
    yield SystemCommand(
        "Serve to Foxglove",
        "Serve this system to Foxglove / Lichtblick on ws://127.0.0.1:8765 (docs/foxglove.md)",
        app.action_serve_foxglove,
    )
    yield SystemCommand(
        "Save SVG screenshot", "Write the current screen as an SVG file", app.action_save_svg
    )
    yield SystemCommand("Reload keymap", f"Read {app.settings.keymap_file} again", app.load_keymap)
    yield SystemCommand("Help", "Keys and what the current view shows", app.action_help)
