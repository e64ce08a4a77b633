"""Save as test: what a view has selected (a message, a call, a recording) written as a
pytest file into the Tests view's folder, under a name derived from it that the user may
change; an existing file is never replaced. On the embedded demo the test starts the
demo's participants itself, so that it passes as saved."""

from __future__ import annotations

from pathlib import Path

from mailbus.testing.codegen import (
    Start,
    call_test,
    message_test,
    session_test,
    steady_fields,
)
from textual.widget import Widget

from mailbus_workbench.model.export import ExportError
from mailbus_workbench.model.saved_tests import SaveError, demo_start, suggest_path, write_new
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.share_screens import ExportScreen

KEPT_FOR_STEADY = 50  # the latest messages of a topic that say which fields are steady


def tests_folder(parts: WorkbenchParts) -> Path:
    return parts.tests_folder or parts.settings.tests_folder


def _start(parts: WorkbenchParts, *, topic: str | None = None, service: str | None = None) -> Start:
    engine = parts.engine
    if engine is None or engine.demo is None:
        return ()  # the test runs against the attached system (mailbus test --config)
    return demo_start(topic=topic, service=service)


def offer(widget: Widget, parts: WorkbenchParts, what: str, name: str, source: str) -> None:
    """The file dialog, prefilled with a free name in the tests folder."""

    def write(path: Path, overwrite: bool) -> str:
        try:
            write_new(path, source)
        except SaveError as exc:
            raise ExportError(str(exc)) from None
        return f"a test of {what}"

    widget.app.push_screen(
        ExportScreen(
            f"Save a test of {what}",
            str(suggest_path(tests_folder(parts), name)),
            write,
            "A pytest file (test_*.py) in the Tests view's folder (T runs it); an existing "
            "file is never replaced.",
        )
    )


def message_source(parts: WorkbenchParts, topic: str, body: str, bodies: list[str]) -> str:
    """A message test: the fields that stayed the same over the topic's latest messages."""
    where = steady_fields(bodies[-KEPT_FOR_STEADY:] or [body])
    return message_test(topic, body, where=where, start=_start(parts, topic=topic))


def call_source(parts: WorkbenchParts, service: str, request: str, response: str) -> str:
    return call_test(service, request, response, start=_start(parts, service=service))


def session_source(parts: WorkbenchParts, session: Path) -> str:
    """A golden test of the recording, run against the attached system (a recording of
    the demo replays into no demo: its outputs are random, so its golden test is for a
    system of one's own)."""
    return session_test(str(session.resolve()))
