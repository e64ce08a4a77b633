"""Golden tests from recordings: replay a session's inputs into the system under test,
take what it outputs, and compare that with the golden outputs.

Outputs are the topics the system publishes and the services it serves (their
responses): declared with `outputs=`, else what the system's participants announce.
Every other recorded message and request is an input, replayed with the session's
timing scaled by `rate`; so are the recorded requests to the system's own services,
whose responses (the system's, not the recorded ones replayed beside them) are its
outputs. The golden outputs are the golden file's when it exists, else the recording's
own; `--mailbus-update` (or `update=True`) writes this run's outputs to the file. A
golden test with no golden output would check nothing: refused unless asked. Fields
that change between runs are dropped (`ignore=`) or rewritten (`normalise=`) on both
sides; numbers compare within `tolerance`; order (the order the system produced its
outputs, by their publishers' timestamps, not the order a transport delivered them) is
compared per topic (`order="topic"`), over all outputs (`"global"`) or not at all
(`"none"`). A golden output not produced and an output not in the golden file both
fail.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mailbus import headers as H
from mailbus.envelope import Message
from mailbus.testing.buses import Bus
from mailbus.testing.matching import MISSING, same
from mailbus.testing.report import shown_body
from mailbus.testing.watch import Watch
from mailbus.trace import Kind, TraceEvent

ORDERS = ("topic", "global", "none")
FORMAT = "mailbus.golden/1"
DIFF_LINES = 40
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Output:
    """One output as compared: a topic's message or a service's response."""

    name: str
    what: str  # message or response
    body: Any  # the normalised JSON document, or the text when the body is not JSON

    def shown(self) -> str:
        text = self.body if isinstance(self.body, str) else json.dumps(self.body)
        return f"{self.name} {shown_body(text)}"


def flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}, "c": [2]}` as `{"a.b": 1, "c.0": 2}`."""
    if isinstance(doc, Mapping):
        items: Iterable[tuple[str, Any]] = ((str(k), v) for k, v in doc.items())
    elif isinstance(doc, list):
        items = ((str(i), v) for i, v in enumerate(doc))
    else:
        return {prefix: doc}
    flat: dict[str, Any] = {}
    for key, value in items:
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else key))
    return flat


def _drop(doc: Any, path: Sequence[str]) -> None:
    for part in path[:-1]:
        if isinstance(doc, Mapping):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return
    if isinstance(doc, dict):
        doc.pop(path[-1], None)


class Normaliser:
    """What changes between runs, taken out on both sides before comparing."""

    def __init__(
        self,
        ignore: Iterable[str] = (),
        normalise: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        self.ignore = [p.split(".") for p in ignore]
        self.normalise = dict(normalise or {})

    def __call__(self, name: str, what: str, body: str) -> Output:
        try:
            doc: Any = json.loads(body)
        except ValueError:
            return Output(name, what, body)
        for parts in self.ignore:
            _drop(doc, parts)
        if self.normalise and isinstance(doc, dict):
            flat = flatten(doc)
            for path, rewrite in self.normalise.items():
                if path in flat:
                    _set(doc, path.split("."), rewrite(flat[path]))
        return Output(name, what, doc)


def _set(doc: Any, path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    if isinstance(doc, list):
        doc[int(path[-1])] = value
    else:
        doc[path[-1]] = value


def field_diff(expected: Output, actual: Output, tolerance: float) -> list[str]:
    """The fields that differ, one line each; [] when the outputs are the same."""
    if expected.name != actual.name:
        return [f"name: expected {expected.name!r}, got {actual.name!r}"]
    if isinstance(expected.body, str) or isinstance(actual.body, str):
        if expected.body == actual.body:
            return []
        return [f"body: expected {expected.shown()!r}, got {actual.shown()!r}"]
    want, got = flatten(expected.body), flatten(actual.body)
    lines = []
    for path in sorted(want.keys() | got.keys()):
        w, g = want.get(path, MISSING), got.get(path, MISSING)
        if w is MISSING:
            lines.append(f"{path}: not in the golden output, got {json.dumps(g)}")
        elif g is MISSING:
            lines.append(f"{path}: expected {json.dumps(w)}, missing")
        elif not same(g, w, tolerance):
            lines.append(f"{path}: expected {json.dumps(w)}, got {json.dumps(g)}")
    return lines


def compare(
    expected: Sequence[Output], actual: Sequence[Output], order: str, tolerance: float
) -> list[str]:
    """The readable differences between golden and actual outputs ([] when none)."""
    if order == "none":
        left = list(actual)
        lines = []
        for want in expected:
            hit = next((a for a in left if not field_diff(want, a, tolerance)), None)
            if hit is None:
                lines.append(f"golden output not produced: {want.shown()}")
            else:
                left.remove(hit)
        lines += [f"output not in the golden file: {a.shown()}" for a in left]
        return lines
    groups: dict[str, tuple[list[Output], list[Output]]] = {}
    for side, outputs in enumerate((expected, actual)):
        for output in outputs:
            group = output.name if order == "topic" else "all outputs"
            groups.setdefault(group, ([], []))[side].append(output)
    lines = []
    for group, (wanted, got) in groups.items():
        if wanted != got:  # equal as they are: no alignment to compute
            lines += _aligned(group, wanted, got, tolerance)
    return lines


def _key(output: Output) -> str:
    return json.dumps([output.name, output.body], sort_keys=True)


def _aligned(group: str, wanted: list[Output], got: list[Output], tolerance: float) -> list[str]:
    """Differences of two sequences aligned as a text diff aligns lines, so that one
    output too many or too few is reported as that, not as every later one changed."""
    matcher = difflib.SequenceMatcher(
        None, [_key(o) for o in wanted], [_key(o) for o in got], autojunk=False
    )
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(pairs):
            diffs = field_diff(wanted[i1 + k], got[j1 + k], tolerance)
            if diffs:
                lines.append(f"{group} #{j1 + k + 1}: {got[j1 + k].shown()}")
                lines += [f"    {d}" for d in diffs]
        for i in range(i1 + pairs, i2):
            lines.append(f"{group}: golden output #{i + 1} not produced: {wanted[i].shown()}")
        for j in range(j1 + pairs, j2):
            lines.append(f"{group} #{j + 1}: output not in the golden file: {got[j].shown()}")
    return lines


def read_golden(path: Path) -> list[Output]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, not {FORMAT!r}")
        return [Output(o["name"], o["what"], o["body"]) for o in data["outputs"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"golden file {path} cannot be read ({exc}); --mailbus-update writes it anew"
        ) from None


def write_golden(path: Path, outputs: Sequence[Output], session: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "format": FORMAT,
        "session": session,
        "outputs": [{"name": o.name, "what": o.what, "body": o.body} for o in outputs],
    }
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)


def _replayed(event: TraceEvent) -> bool:
    """Whether the email was sent by a replay (it names the recorded one it replays)."""
    return any(name.lower() == _REPLAY_OF for name in event.headers)


_REPLAY_OF = H.REPLAY_OF.lower()


def names_regex(names: Iterable[str]) -> str:
    return "^(?:" + "|".join(re.escape(n) for n in sorted(names)) + ")$"


def in_produced_order(arrivals: Sequence[T], produced_ns: Sequence[int]) -> list[T]:
    """`arrivals` sorted by when each was produced; arrival order breaks ties."""
    order = sorted(range(len(arrivals)), key=lambda i: (produced_ns[i], i))
    return [arrivals[i] for i in order]


class Capture:
    """What the system under test outputs on the bus. `produced()` gives it in the order
    the system produced it (its publishers' timestamps), not the order the transport
    delivered it: a mail server may deliver two emails sent 50 ms apart the other way
    round, and that is not the system's output changing."""

    def __init__(self, bus: Bus, topics: Iterable[str], services: Iterable[str]) -> None:
        self.items: list[tuple[str, str, str]] = []  # in arrival order
        self._produced_ns: list[int] = []
        self._cond = threading.Condition()
        self._services = set(services)
        self.answered: dict[str, int] = dict.fromkeys(self._services, 0)
        self._watches = [Watch(bus.context, t, self._message) for t in topics]
        self._remove = bus.context.tracer.add_listener(self._event) if self._services else None

    def _add(self, name: str, what: str, body: str, produced_ns: int) -> None:
        with self._cond:
            self.items.append((name, what, body))
            self._produced_ns.append(produced_ns)
            if what == "response":
                self.answered[name] += 1
            self._cond.notify_all()

    def _message(self, message: Message) -> None:
        self._add(message.topic, "message", message.body, message.info.source_timestamp_ns)

    def _event(self, event: TraceEvent) -> None:
        wanted = event.kind == Kind.RECEIVED and event.detail == "response"
        if wanted and event.name in self._services and not _replayed(event):
            # The system's answer to a replayed request (the recorded answer, replayed
            # beside it, is not the system's): its arrival is its place.
            self._add(event.name, "response", event.body or "", time.time_ns())

    def produced(self) -> list[tuple[str, str, str]]:
        with self._cond:
            return in_produced_order(self.items, self._produced_ns)

    def wait_for(self, count: int, deadline: float) -> None:
        with self._cond:
            while len(self.items) < count and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)

    def wait_answered(self, service: str, count: int, deadline: float) -> bool:
        """Until `service` has answered `count` requests (or the deadline): whether it did."""
        with self._cond:
            while self.answered[service] < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def wait_quiet(self, quiet: float, deadline: float) -> None:
        """Until nothing new has arrived for `quiet` seconds (or the deadline)."""
        with self._cond:
            while (left := deadline - time.monotonic()) > 0:
                count = len(self.items)
                self._cond.wait(min(quiet, left))
                if len(self.items) == count:
                    return

    def close(self) -> None:
        for watch in self._watches:
            watch.close()
        if self._remove is not None:
            self._remove()
