"""Save as test: what a view has selected (a message, a call, a recording) written as a
pytest file into the Tests view's folder, under a name derived from it that the user may
change; an existing file is never replaced. On the embedded demo the test starts the
demo's participants itself, so that it passes as saved.

A system may publish or answer only because of what was sent to it: the messages and
calls the workbench sent (Publish, Call) before the saved one are sent again by the test
first, told from the others' by their sender's GID among what the workbench received."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mailbus.testing.codegen import (
    Input,
    Start,
    call_test,
    inputs_from_received,
    message_test,
    session_test,
    steady_fields,
)
from mailbus.trace import TraceEvent
from textual.widget import Widget

from mailbus_workbench.model.export import ExportError
from mailbus_workbench.model.saved_tests import SaveError, demo_start, suggest_path, write_new
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.share_screens import ExportScreen

KEPT_FOR_STEADY = 50  # the latest messages of a topic that say which fields are steady
SAVED_CALL = "saved-call"  # stands for the sender of a call the saved test makes itself


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


def _seen_ns(event: TraceEvent) -> int:
    return event.reception_timestamp_ns or event.time_ns


def _sent_by(parts: WorkbenchParts) -> frozenset[str]:
    return parts.engine.sender_gids() if parts.engine is not None else frozenset()


def _received(parts: WorkbenchParts, until: TraceEvent | None) -> list[TraceEvent]:
    """The messages and answered requests the workbench keeps (its own came back to it
    too), up to `until` when given, and the responses to those requests (a request
    without one is no input: sent again, it would fail the test)."""
    model = parts.model
    events = [r.event for name in model.topics.names() for r in model.topics.history(name)]
    calls = [(t.request, t.response) for t in model.services.traces() if not t.duplicate]
    events += [request for request, response in calls if request and response]
    if until is not None:
        cut = _seen_ns(until)
        events = [e for e in events if _seen_ns(e) <= cut]
    return events + [response for request, response in calls if request and response]


def message_source(parts: WorkbenchParts, record: MessageRecord) -> str:
    """A message test of `record`: the workbench's messages and calls before it sent
    again first, and the fields that stayed the same over the topic's messages since
    the last of those (over its latest messages when it sent none)."""
    topic, event = record.event.name, record.event
    sent_by = _sent_by(parts)
    events = _received(parts, event) if sent_by else []
    inputs = inputs_from_received(events, sent_by, topic=topic) if sent_by else []
    if event.source_gid in sent_by:
        # The workbench's own message: the test sends it too, after what came before.
        inputs.append(Input("message", topic, record.body))
    # What came before the last input answered another state of the system.
    since = max((_seen_ns(e) for e in events if e.source_gid in sent_by), default=0)
    history = parts.model.topics.history(topic)
    bodies = [r.body for r in history if since < _seen_ns(r.event) <= _seen_ns(event)]
    where = steady_fields(bodies[-KEPT_FOR_STEADY:] or [record.body])
    return message_test(
        topic, record.body, where=where, start=_start(parts, topic=topic), inputs=inputs
    )


def call_source(
    parts: WorkbenchParts,
    service: str,
    request: str,
    response: str,
    *,
    seen: TraceEvent | None = None,
) -> str:
    """A call test, the workbench's messages and calls before it sent again first (the
    state the service answered from). `seen`: the request as received; without it, the
    workbench's latest call to `service`."""
    sent_by = _sent_by(parts)
    inputs: list[Input] = []
    if sent_by:
        events = _received(parts, seen)
        if seen is not None and seen.source_gid not in sent_by:
            # Another's call, which the saved test makes itself: the inputs end there.
            events = [e for e in events if e is not seen]
            events.append(replace(seen, source_gid=SAVED_CALL))
            sent_by |= {SAVED_CALL}
        inputs = inputs_from_received(events, sent_by, service=service)
    return call_test(
        service, request, response, start=_start(parts, service=service), inputs=inputs
    )


def session_source(parts: WorkbenchParts, session: Path) -> str:
    """A golden test of the recording, run against the attached system (a recording of
    the demo replays into no demo: its outputs are random, so its golden test is for a
    system of one's own)."""
    return session_test(str(session.resolve()))
