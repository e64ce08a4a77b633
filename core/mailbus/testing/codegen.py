"""Save what was seen as a test: pytest files a user can read and edit, written from a
selected message, a selected call or a recorded session (for the workbench and the
notebook to call; pure functions of their arguments, no I/O).

Each file uses the kit's fixtures. `start` names the participants the test starts
first, as `(command, ready)` pairs for `system.start`; without it the test runs against
the system the bus is attached to (`mailbus test FILE --config my.toml`).

A saved test passes as saved against the system that produced what was seen, also when
that system publishes only in answer to inputs or answers from state: `inputs` are what
was sent to it before (`inputs_from_trace` finds them in what a context traced), sent
again by the test in order, each waiting for the system's answer when it answered then;
and fields that change between runs (times, stamps, UUIDs: `changes_between_runs`) are
left out of the checks, listed in a comment of the file to put back by hand.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mailbus.names import check_name
from mailbus.trace import Kind, TraceEvent

Start = Sequence[tuple[str, Sequence[str]]]
_NOT_WORD = re.compile(r"\W+")
SCALARS = (str, int, float, bool, type(None))

# Field names that hold a time or a one-off identity, and values that look like one.
CHANGING_NAMES = {
    "stamp", "timestamp", "time", "ts", "date", "datetime", "now", "created", "updated",
    "uptime", "elapsed", "uuid", "guid", "nonce",
}  # fmt: skip
CHANGING_SUFFIXES = ("_at", "_ts", "_time", "_ns", "_ms", "_stamp", "_date", "_uuid", "_nonce")
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_UUID = re.compile(r"^[0-9a-f]{8}-?(?:[0-9a-f]{4}-?){3}[0-9a-f]{12}$", re.IGNORECASE)
# Seconds, milliseconds, microseconds and nanoseconds since 1970 of the years 2001-2286.
_EPOCHS = ((1e9, 1e10), (1e12, 1e13), (1e15, 1e16), (1e18, 1e19))


def changes_between_runs(name: str, value: Any) -> bool:
    """Whether a field is a time or a one-off identity, which a saved check must not
    hold to: by its name (`stamp`, `created_at`, `uuid`) or its value (a number of
    seconds to nanoseconds since 1970, an ISO date and time, a UUID)."""
    key = name.lower()
    if key in CHANGING_NAMES or key.endswith(CHANGING_SUFFIXES):
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return any(lo <= abs(value) < hi for lo, hi in _EPOCHS)
    if isinstance(value, str):
        return bool(_ISO_TIME.match(value) or _UUID.match(value))
    return False


def split_changing(fields: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fields to check, the fields left out as changing between runs)."""
    kept = {k: v for k, v in fields.items() if not changes_between_runs(k, v)}
    return kept, {k: v for k, v in fields.items() if k not in kept}


@dataclass(frozen=True, slots=True)
class Input:
    """What was sent to the system before the saved message or call: a message
    published or a request made (`what`), and the topic the system answered it on then
    ("": it did not answer on a topic), which the saved test waits for."""

    what: str  # "message" or "request"
    name: str
    body: str
    answered_on: str = ""


def inputs_from_trace(
    events: Iterable[TraceEvent], *, topic: str | None = None, service: str | None = None
) -> list[Input]:
    """The inputs that led to the last message on `topic` (or to the last request to
    `service`) in what one context traced: the requests it sent and the messages it
    published before that, each message with the first topic the system published on
    after it. The saved topic is the system's. When the system runs in that same context
    (a message the context published was also taken in there), what it publishes is
    traced as the context's too: a topic first published right after an input, before
    anything else was sent, is the system's answer, not an input, and so is what nobody
    in the context took in. A request no response answered (timed out, misspelt) is
    left out: sent again it would fail the test, and it answers nothing. Empty when the
    saved message or call was not seen."""
    if (topic is None) == (service is None):
        raise ValueError("inputs_from_trace: name a topic or a service")
    events = list(events)
    answered = {e.in_reply_to for e in events if e.in_reply_to and _is_response(e)}
    traced = [
        e
        for e in events
        if e.kind in _TRAFFIC and (e.kind != Kind.REQUEST_SENT or e.message_id in answered)
    ]

    def saved(event: TraceEvent) -> bool:
        if topic is not None:
            return _is_message(event) and event.name == topic
        return event.kind == Kind.REQUEST_SENT and event.name == service

    ends = [i for i, event in enumerate(traced) if saved(event)]
    if not ends:
        return []
    published = {e.message_id for e in traced if e.kind == Kind.PUBLISHED}
    delivered = {e.message_id for e in traced if _is_message(e) and e.kind == Kind.RECEIVED}
    local_system = bool(published & delivered)
    answers: set[str] = set() if topic is None else {topic}
    inputs: list[Input] = []
    answerable = False  # the last thing sent was an input the system has not answered yet
    for event in traced[: ends[-1]]:
        if event.kind == Kind.REQUEST_SENT:
            inputs.append(Input("request", event.name, event.body or ""))
            answerable = True
            continue
        if not _is_message(event):
            continue
        if event.kind == Kind.PUBLISHED:
            first = all(i.name != event.name for i in inputs if i.what == "message")
            if local_system and answerable and first:
                answers.add(event.name)  # first published right after an input
            is_input = event.name not in answers and (
                not local_system or event.message_id in delivered
            )
        else:
            is_input = False
            if event.message_id in published:
                continue  # the context's own message, taken in: traced when published
        if is_input:
            inputs.append(Input("message", event.name, event.body or ""))
            answerable = True
        elif answerable:
            # The system's message: the answer to the input before it.
            last = inputs[-1]
            if last.what == "message":
                inputs[-1] = Input(last.what, last.name, last.body, event.name)
            answerable = False
    return inputs


def inputs_from_received(
    events: Iterable[TraceEvent],
    sent_by: Collection[str],
    *,
    topic: str | None = None,
    service: str | None = None,
) -> list[Input]:
    """`inputs_from_trace` for an observer that keeps what it received only (the
    workbench): the messages and requests whose sender's GID is in `sent_by` (the
    saver's own publishers and clients) count as sent by it, the others as the
    system's; `events` in any order (by reception time here), with the responses
    received (a request without one is left out)."""
    sent_kinds = {"message": Kind.PUBLISHED, "request": Kind.REQUEST_SENT}
    traced = []
    for event in sorted(events, key=lambda e: e.reception_timestamp_ns or e.time_ns):
        kind = sent_kinds.get(event.detail)
        if event.kind == Kind.RECEIVED and kind is not None and event.source_gid in sent_by:
            event = replace(event, kind=kind.value)
        traced.append(event)
    return inputs_from_trace(traced, topic=topic, service=service)


_TRAFFIC = {Kind.PUBLISHED, Kind.REQUEST_SENT, Kind.RECEIVED}


def _is_response(event: TraceEvent) -> bool:
    return event.kind == Kind.RESPONSE_MATCHED or (
        event.kind == Kind.RECEIVED and event.detail == "response"
    )


def _is_message(event: TraceEvent) -> bool:
    return event.kind == Kind.PUBLISHED or (
        event.kind == Kind.RECEIVED and event.detail == "message"
    )


def function_name(*parts: str) -> str:
    """`test_` and the parts as a Python identifier (`thermo/convert` -> thermo_convert)."""
    words = "_".join(_NOT_WORD.sub("_", p).strip("_") for p in parts if p).lower()
    return "test_" + (words or "saved")


def scalar_fields(body: str) -> dict[str, Any]:
    """The top-level scalar fields of a JSON object body (what a `where=` can name
    without getting brittle); empty for any other body."""
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(doc, Mapping):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, SCALARS)}


def steady_fields(bodies: Sequence[str]) -> dict[str, Any]:
    """The scalar fields of the last body that every body carries with the same value:
    a field that changed between the messages seen (a reading, a counter, a time) would
    make a saved test fail on the next run. With one body, all its scalar fields."""
    if not bodies:
        return {}
    steady = scalar_fields(bodies[-1])
    for body in bodies[:-1]:
        fields = scalar_fields(body)
        steady = {k: v for k, v in steady.items() if k in fields and fields[k] == v}
    return steady


def _header(fixtures: Iterable[str], name: str, what: str) -> list[str]:
    return [
        f"def {name}({', '.join(fixtures)}):",
        f'    """Saved from {what}; edit the checks to what must hold."""',
    ]


def _starts(start: Start) -> list[str]:
    lines = []
    for command, ready in start:
        lines.append(f"    system.start({command!r}, ready={list(ready)!r})")
    return lines


def _left_out(changing: Mapping[str, Any]) -> list[str]:
    if not changing:
        return []
    lines = ["    # Left out of the check: they change between runs (put one back to check it)."]
    lines += [f"    #     {name!r}: {value!r}," for name, value in changing.items()]
    return lines


def _sends(inputs: Sequence[Input], timeout: float) -> list[str]:
    """The inputs sent again in order; each waits for the system's answer (a request
    for its response, a message for the topic the system answered it on then)."""
    if not inputs:
        return []
    lines = ["    # What was sent to the system before, sent again in order."]
    for item in inputs:
        check_name(item.name, "input")
        if item.what == "request":
            lines.append(f"    bus.client({item.name!r}).call({item.body!r}, timeout={timeout!r})")
        elif item.answered_on:
            check_name(item.answered_on, "topic")
            lines += [
                f"    answered = expect.topic({item.answered_on!r}, within={timeout!r})",
                f"    bus.publisher({item.name!r}).publish({item.body!r})",
                "    answered.wait()",
            ]
        else:
            lines.append(f"    bus.publisher({item.name!r}).publish({item.body!r})")
    return lines


def _module(doc: str, body: list[str]) -> str:
    return "\n".join([f'"""{doc}"""', "", "", *body, ""])


def message_test(
    topic: str,
    body: str,
    *,
    start: Start = (),
    within: float = 10.0,
    where: Mapping[str, Any] | None = None,
    inputs: Sequence[Input] = (),
) -> str:
    """A test that expects a message like this one on `topic`: its scalar fields, or the
    fields of `where` when given (`steady_fields` of the messages seen; {}: any message),
    less those that change between runs; `inputs` are sent first (after `start`)."""
    check_name(topic, "topic")
    fixtures = ["bus", "expect", *(["system"] if start else [])]
    fields, changing = split_changing(scalar_fields(body) if where is None else dict(where))
    where_arg = f", where={fields!r}" if fields else ""
    lines = _header(fixtures, function_name(topic), f"a message on {topic}")
    lines += _left_out(changing)
    lines += [f"    seen = expect.topic({topic!r}{where_arg}, within={within!r})"]
    lines += _starts(start)
    lines += _sends(inputs, within)
    lines += ["    seen.wait()"]
    return _module(f"A saved test: a message on {topic}.", lines)


def call_test(
    service: str,
    request: str,
    response: str,
    *,
    start: Start = (),
    timeout: float = 10.0,
    inputs: Sequence[Input] = (),
) -> str:
    """A test that calls `service` with `request` and expects a response like `response`
    (its scalar fields, less those that change between runs), after sending `inputs`
    (the state the service answered from)."""
    check_name(service, "service")
    fixtures = ["bus", "expect", *(["system"] if start else [])]
    fields, changing = split_changing(scalar_fields(response))
    lines = _header(fixtures, function_name(service), f"a call to {service}")
    lines += _starts(start)
    lines += _sends(inputs, timeout)
    lines += _left_out(changing)
    check = f".responds(where={fields!r})" if fields else ".answered(1)"
    lines += [
        f"    calls = expect.service({service!r}){check}",
        f"    response = bus.client({service!r}).call({request!r}, timeout={timeout!r})",
    ]
    if not fields and not changing:
        lines.append(f"    assert response.body == {response!r}")
    lines.append("    calls.wait()")
    return _module(f"A saved test: a call to {service}.", lines)


def session_test(
    session: str,
    *,
    outputs: Sequence[str] = (),
    start: Start = (),
    order: str = "topic",
) -> str:
    """A golden test: the session's inputs replayed into the system, its outputs
    compared with the recording (then with the golden file `--mailbus-update` writes)."""
    for name in outputs:
        check_name(name, "output")
    fixtures = ["golden", *(["system"] if start else [])]
    lines = _header(fixtures, function_name("golden", session.rstrip("/").split("/")[-1]), session)
    lines += _starts(start)
    named = f", outputs={list(outputs)!r}" if outputs else ""
    lines.append(f"    golden.check({session!r}{named}, order={order!r})")
    return _module(f"A saved golden test from the recording {session}.", lines)
