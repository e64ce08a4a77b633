"""Save what was seen as a test: pytest files a user can read and edit, written from a
selected message, a selected call or a recorded session (for the workbench and the
notebook to call; pure functions of their arguments, no I/O).

Each file uses the kit's fixtures. `start` names the participants the test starts
first, as `(command, ready)` pairs for `system.start`; without it the test runs against
the system the bus is attached to (`mailbus test FILE --config my.toml`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mailbus.names import check_name

Start = Sequence[tuple[str, Sequence[str]]]
_NOT_WORD = re.compile(r"\W+")
SCALARS = (str, int, float, bool, type(None))


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


def _module(doc: str, body: list[str]) -> str:
    return "\n".join([f'"""{doc}"""', "", "", *body, ""])


def message_test(
    topic: str,
    body: str,
    *,
    start: Start = (),
    within: float = 10.0,
    where: Mapping[str, Any] | None = None,
) -> str:
    """A test that expects a message like this one on `topic`: its scalar fields, or the
    fields of `where` when given (`steady_fields` of the messages seen; {}: any message)."""
    check_name(topic, "topic")
    fixtures = ["bus", "expect", *(["system"] if start else [])]
    fields = scalar_fields(body) if where is None else dict(where)
    where_arg = f", where={fields!r}" if fields else ""
    lines = _header(fixtures, function_name(topic), f"a message on {topic}")
    lines += [f"    seen = expect.topic({topic!r}{where_arg}, within={within!r})"]
    lines += _starts(start)
    lines += ["    seen.wait()"]
    return _module(f"A saved test: a message on {topic}.", lines)


def call_test(
    service: str,
    request: str,
    response: str,
    *,
    start: Start = (),
    timeout: float = 10.0,
) -> str:
    """A test that calls `service` with `request` and expects a response like `response`
    (its scalar fields)."""
    check_name(service, "service")
    fixtures = ["bus", "expect", *(["system"] if start else [])]
    fields = scalar_fields(response)
    lines = _header(fixtures, function_name(service), f"a call to {service}")
    lines += _starts(start)
    check = f".responds(where={fields!r})" if fields else ".answered(1)"
    lines += [
        f"    calls = expect.service({service!r}){check}",
        f"    response = bus.client({service!r}).call({request!r}, timeout={timeout!r})",
    ]
    if not fields:
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
