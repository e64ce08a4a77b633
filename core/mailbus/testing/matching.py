"""What an expectation's `where=` means, and how far a message is from matching it.

`where` is a callable (given the `Observed` message, true when it matches), a mapping of
field paths to wanted values (`{"celsius": 21.5, "unit": "C"}`: every field must be
equal, floats within `FLOAT_TOLERANCE`), or a query in the engine's query language (the
one Find and `mailbus topic echo` use), compiled by `compile_query` alone.

The nearest misses of a failed expectation come from `distance`: how many wanted fields
differ, so the closest message is listed first with its field-by-field diff.
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailbus import field_path
from mailbus.envelope import Message
from mailbus.query import Term, parse_where
from mailbus.trace import TraceEvent

FLOAT_TOLERANCE = 1e-9
MISSING: Any = field_path.MISSING  # a field the body does not have


class Observed:
    """One email an expectation saw: a topic's message, or a service's request or
    response (from the trace). Read lazily: an expectation on a busy topic builds one
    per message, and most are never looked at."""

    __slots__ = ("_doc", "index", "source")

    def __init__(self, source: Message | TraceEvent, index: int = 0) -> None:
        self.source = source
        self.index = index  # its place among the arrivals on its name
        self._doc: Any = MISSING

    @property
    def name(self) -> str:
        source = self.source
        return source.topic if isinstance(source, Message) else source.name

    @property
    def body(self) -> str:
        return self.source.body or ""

    @property
    def received_ns(self) -> int:
        source = self.source
        if isinstance(source, Message):
            return source.info.reception_timestamp_ns
        return source.reception_timestamp_ns

    @property
    def what(self) -> str:
        """message, request or response."""
        source = self.source
        return "message" if isinstance(source, Message) else source.detail

    @property
    def headers(self) -> Mapping[str, str]:
        source = self.source
        return source.email.headers if isinstance(source, Message) else source.headers

    @property
    def sequence(self) -> int:
        source = self.source
        return (
            source.info.sequence_number if isinstance(source, Message) else source.sequence_number
        )

    @property
    def source_gid(self) -> str:
        source = self.source
        return source.info.source_gid if isinstance(source, Message) else source.source_gid

    @property
    def message_id(self) -> str:
        return self.source.message_id

    @property
    def in_reply_to(self) -> str:
        source = self.source
        return source.email.in_reply_to if isinstance(source, Message) else source.in_reply_to

    @property
    def extra(self) -> Mapping[str, object]:
        source = self.source
        return {} if isinstance(source, Message) else source.extra

    @property
    def doc(self) -> Any:
        """The body as JSON (None when it is not JSON), parsed once."""
        if self._doc is MISSING:
            try:
                self._doc = json.loads(self.body)
            except ValueError:
                self._doc = None
        return self._doc


Predicate = Callable[[Observed], bool]


@dataclass(frozen=True, slots=True)
class FieldDiff:
    path: str
    wanted: str  # as written: `30`, `"C"`, `> 25`
    got: Any  # MISSING when the message has no such field

    def line(self) -> str:
        got = "(missing)" if self.got is MISSING else json.dumps(self.got)
        return f"{self.path}: expected {self.wanted}, got {got}"


class Raised:
    """What a `where=` callable raised: the first exception and the message it raised on
    (a raising predicate is that expectation's failure, not every expectation's on the
    topic), how many times, and whom to wake so that the failure is reported at once."""

    __slots__ = ("count", "error", "observed", "wake")

    def __init__(self) -> None:
        self.count = 0
        self.error: BaseException | None = None
        self.observed: Observed | None = None
        self.wake: Callable[[], None] | None = None

    def add(self, observed: Observed, error: BaseException) -> None:
        self.count += 1
        if self.error is None:
            self.error, self.observed = error, observed
            if self.wake is not None:
                self.wake()

    def line(self, text: str) -> str:
        """`where=f(message) raised KeyError: 'x' (at test_x.py:12) on message {...}`."""
        error, observed = self.error, self.observed
        assert error is not None and observed is not None
        frames = traceback.extract_tb(error.__traceback__)
        at = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        shown = " ".join(observed.body.split())
        shown = shown if len(shown) <= 100 else shown[:97] + "..."
        times = f", {self.count} times" if self.count > 1 else ""
        return (
            f"where={text} raised {type(error).__name__}: {error}{at} on "
            f"{observed.what} {shown}{times}"
        )


@dataclass(frozen=True, slots=True)
class Where:
    """A compiled `where=`: the test, its description, and the wanted fields (for a
    field-by-field diff) when it names any. A callable's exceptions are caught and kept
    in `raised` (a message it raises on does not match)."""

    test: Predicate
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    terms: tuple[Term, ...] = ()  # a query's conditions
    raised: Raised | None = None

    @property
    def named(self) -> bool:
        """Whether it names fields, so that a miss can be told field by field."""
        return bool(self.fields or self.terms)

    def diff(self, observed: Observed) -> list[FieldDiff]:
        diffs = [
            FieldDiff(path, json.dumps(wanted), got)
            for path, wanted in self.fields.items()
            if not same(got := field_at(observed, path), wanted)
        ]
        for term in self.terms:
            if not term.matches(observed):
                shown = f"{term.topic}.{term.name}" if term.topic else term.name
                wanted = f"{term.operator} {term.value}"
                diffs.append(FieldDiff(shown, wanted, _term_value(observed, term)))
        return diffs


ANYTHING = Where(lambda _: True, "")


def field_at(observed: Observed, path: str) -> Any:
    """The value at a field path of the JSON body (`pose.x`, `items.0`, `items[0]`: the
    engine's grammar, mailbus.field_path), else a header of that name, else MISSING."""
    try:
        steps = field_path.parse(path).steps
    except field_path.FieldPathError:
        steps = None  # not a field path: a header's name (`Client-GID`)
    value = MISSING if steps is None else field_path.get(observed.doc, steps)
    if value is MISSING:
        lowered = path.lower()
        for name, header in observed.headers.items():
            if name.lower() == lowered:
                return header
    return value


def _term_value(observed: Observed, term: Term) -> Any:
    """What a query's term found: its header, else its body field, else MISSING."""
    for name, header in observed.headers.items():
        if name.lower() == term.name:
            return header
    return field_path.get(observed.doc, term.path)


def same(got: Any, wanted: Any, tolerance: float = FLOAT_TOLERANCE) -> bool:
    """Equal, with numbers compared within `tolerance` (absolute or relative)."""
    if isinstance(wanted, bool) or isinstance(got, bool):
        return type(got) is type(wanted) and got == wanted
    if isinstance(wanted, int | float) and isinstance(got, int | float):
        return math.isclose(got, wanted, rel_tol=tolerance, abs_tol=tolerance)
    if isinstance(wanted, Mapping) and isinstance(got, Mapping):
        return wanted.keys() == got.keys() and all(
            same(got[k], wanted[k], tolerance) for k in wanted
        )
    if isinstance(wanted, list) and isinstance(got, list):
        return len(wanted) == len(got) and all(
            same(g, w, tolerance) for g, w in zip(got, wanted, strict=True)
        )
    return bool(got == wanted)


def compile_where(where: object) -> Where:
    """`where=` as a `Where`; TypeError naming what is accepted otherwise."""
    if where is None:
        return ANYTHING
    if isinstance(where, Where):
        return where
    if isinstance(where, str):
        return compile_query(where)
    if isinstance(where, Mapping):
        wanted = {str(k): v for k, v in where.items()}
        return Where(
            lambda o: all(same(field_at(o, p), v) for p, v in wanted.items()),
            ", ".join(f"{p} == {json.dumps(v)}" for p, v in wanted.items()),
            wanted,
        )
    if callable(where):
        name = getattr(where, "__name__", "") or repr(where)
        raised = Raised()
        predicate: Callable[[Observed], object] = where

        def test(observed: Observed) -> bool:
            try:
                return bool(predicate(observed))
            except Exception as exc:
                raised.add(observed, exc)
                return False

        return Where(test, f"{name}(message)", raised=raised)
    raise TypeError(
        f"where= takes a query string, a mapping of fields to values or a callable, "
        f"not {type(where).__name__}"
    )


def compile_query(text: str) -> Where:
    """A query in the engine's query language (docs/queries.md: `celsius>25
    unit=C`); QueryError says what is wrong with it. Every use of the string form
    goes through here."""
    query = parse_where(text)
    return Where(query.matches, text, terms=query.terms)


def distance(where: Where, observed: Observed) -> int:
    """How many wanted fields differ (0 for a predicate without fields)."""
    return len(where.diff(observed)) if where.named else 0
